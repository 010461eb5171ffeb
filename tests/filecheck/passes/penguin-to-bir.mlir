// RUN: nkic-opt %s -p penguin-to-bir | filecheck %s
// RUN: nkic-opt %s -p penguin-to-bir | nkic-opt -p translate-nki-ast-to-bir | filecheck %s --check-prefix=KERNEL

// The host graph becomes @main, the kernel node an IT56 carrier with the kernel as embedded BIR JSON (FORM B).
// CHECK: bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
// CHECK-NEXT: bir.memloc @a : shared_hbm [256, 512] float32 {kind = "input"}
// CHECK-NEXT: bir.memloc @out : shared_hbm [256, 512] float32 {kind = "output"}
// CHECK-NEXT: bir.nki_klir_kernel {kernel_name = "k", kernel_format = "bir", klir_binary = "{{.*}}nkic-bir-json/1{{.*}}", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64, sb_buf_shape = array<i64: 128, 4096>, psum_buf_shape = array<i64: 128, 0>, nki_binary_version_identifier = "nkic-0.1.0"}
// CHECK-NOT: penguin.

// The embedded function: memlocs, a loop axis, ids, engines from NKI hints (gpsimd -> pool), and name-level dependency edges.
// KERNEL: bir.function @k attributes {inputs = ["a"], outputs = ["out"]} {
// KERNEL-DAG: bir.memloc @x : sbuf [128, 512] float32 {scope = "L0"}
// KERNEL-DAG: bir.memloc @y : sbuf [128, 512] float32 {scope = "L0"}
// KERNEL: bir.loop "L0" "affine" 0 to 2 step 1 {
// KERNEL-NEXT: bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @a[0 + 65536*i0 : [512, 128], [1, 512]] {loc = "k.py:5", id = 0 : i64, engine = "sp"}
// KERNEL-NEXT: bir.activation dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {func = "exp", loc = "k.py:6", id = 1 : i64, engine = "unassigned", deps = [#bir.dep<flow, 0>]}
// KERNEL-NEXT: bir.tensor_tensor dst @x[0 : [512, 128], [1, 512]], data1 @x[0 : [512, 128], [1, 512]], data2 @y[0 : [512, 128], [1, 512]] {op = "add", id = 2 : i64, engine = "pool", deps = [#bir.dep<flow, 0>, #bir.dep<flow, 1>, #bir.dep<output, 0>, #bir.dep<anti, 1>]}
// KERNEL-NEXT: bir.dma_copy dst @out[0 + 65536*i0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "sp", deps = [#bir.dep<flow, 2>]}

builtin.module {
  penguin.graph @main {
  ^bb0(%a: !penguin.tensor<shared_hbm, 256x512xf32>):
    %o = penguin.kernel_node @k(%a) {kind = "external", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 256x512xf32>) -> !penguin.tensor<shared_hbm, 256x512xf32>
    penguin.graph_return %o : !penguin.tensor<shared_hbm, 256x512xf32>
  }
  penguin.kernel @k : (!penguin.tensor<shared_hbm, 256x512xf32>) -> !penguin.tensor<shared_hbm, 256x512xf32> program {
  ^bb0(%a: !penguin.tensor<shared_hbm, 256x512xf32>):
    %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 256x512xf32>
    penguin.loop "affine" 0 to 2 step 1 {
      %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
      %y = penguin.alloc "y" : !penguin.tensor<sbuf, 128x512xf32>
      penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %a[0 + 65536*i0 : [512, 128], [1, 512]] {loc = "k.py:5"}
      penguin.activation dst %y[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]] {func = "exp", loc = "k.py:6"}
      penguin.tensor_tensor dst %x[0 : [512, 128], [1, 512]], data1 %x[0 : [512, 128], [1, 512]], data2 %y[0 : [512, 128], [1, 512]] {op = "add", engine = "gpsimd"}
      penguin.dma_copy dst %out[0 + 65536*i0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]]
    }
    penguin.return %out : !penguin.tensor<shared_hbm, 256x512xf32>
  }
}
