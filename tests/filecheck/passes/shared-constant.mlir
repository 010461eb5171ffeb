// RUN: nkic-opt %s -p nkic-frontend-lowering | filecheck %s --check-prefix=FRONT
// RUN: nkic-opt %s -p nkic-pipeline | filecheck %s --check-prefix=ISA
// RUN: nkic-opt %s -p nkic-pipeline | nkic-opt | filecheck %s --check-prefix=ISA

// nl.shared_constant: a penguin.alloc with data becomes a `constant` bir memloc, named alike in both programs of the
// grid-2 launch (as every shared_hbm tensor), so they read one tensor: one `file` isa.var per core, same var_id and
// bytes.
// FRONT: bir.function @main
// FRONT: bir.memloc @k.const_0 : shared_hbm [2, 2] float32 {kind = "constant", data = "0x0000803f000000400000404000008040"}
// FRONT-NOT: k.p1.const_0
// FRONT: bir.memloc @k.const_0 : shared_hbm [2, 2] float32 {kind = "constant", data = "0x0000803f000000400000404000008040"}
// ISA: isa.core @sg00 {
// ISA: isa.var @k.const_0 : file [2, 2] float32 {var_id = [[ID:[0-9]+]] : i64, data = "0x0000803f000000400000404000008040"}
// ISA: isa.core @sg01 {
// ISA: isa.var @k.const_0 : file [2, 2] float32 {var_id = [[ID]] : i64, data = "0x0000803f000000400000404000008040"}

builtin.module {
  penguin.graph @main {
  ^bb0(%a: !penguin.tensor<shared_hbm, 2x2xf32>):
    %o = penguin.kernel_node @k(%a) {kind = "external", grid = 2 : i64} : (!penguin.tensor<shared_hbm, 2x2xf32>) -> !penguin.tensor<shared_hbm, 2x2xf32>
    penguin.graph_return %o : !penguin.tensor<shared_hbm, 2x2xf32>
  }
  penguin.kernel @k : (!penguin.tensor<shared_hbm, 2x2xf32>) -> !penguin.tensor<shared_hbm, 2x2xf32> program {
  ^bb0(%a: !penguin.tensor<shared_hbm, 2x2xf32>):
    %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 2x2xf32>
    %c = penguin.alloc "const_0" {data = "0x0000803f000000400000404000008040"} : !penguin.tensor<shared_hbm, 2x2xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 2x2xf32>
    penguin.dma_copy dst %x[0 : [2, 2], [1, 2]], src %c[0 : [2, 2], [1, 2]]
    penguin.dma_copy dst %out[0 : [2, 2], [1, 2]], src %x[0 : [2, 2], [1, 2]]
    penguin.return %out : !penguin.tensor<shared_hbm, 2x2xf32>
  }, program {
  ^bb0(%a: !penguin.tensor<shared_hbm, 2x2xf32>):
    %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 2x2xf32>
    %c = penguin.alloc "const_0" {data = "0x0000803f000000400000404000008040"} : !penguin.tensor<shared_hbm, 2x2xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 2x2xf32>
    penguin.dma_copy dst %x[0 : [2, 2], [1, 2]], src %c[0 : [2, 2], [1, 2]]
    penguin.dma_copy dst %out[0 : [2, 2], [1, 2]], src %x[0 : [2, 2], [1, 2]]
    penguin.return %out : !penguin.tensor<shared_hbm, 2x2xf32>
  }
}
