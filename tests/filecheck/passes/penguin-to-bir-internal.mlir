// RUN: nkic-opt %s -p penguin-to-bir | filecheck %s
// RUN: xdsl-opt %s -p penguin-to-bir | filecheck %s

// A kernel node of kind "internal" names a library kernel that is not in the module: penguin-to-bir gets it traced
// by the kernel resolver the tool hands in (nkic.library's, in nkic-opt and through the xdsl.universe entry point)
// and carries it as an IT56 like a traced kernel.
// CHECK: bir.function @main attributes {inputs = ["x"], outputs = ["out"]} {
// CHECK-NEXT: bir.memloc @x : shared_hbm [128, 256] float32 {kind = "input"}
// CHECK-NEXT: bir.memloc @out : shared_hbm [128, 256] float32 {kind = "output"}
// CHECK-NEXT: bir.nki_klir_kernel {kernel_name = "softmax", kernel_format = "bir", {{.*}}func_args = {x = "x"}, func_outs = {out = "out"}
// CHECK-NOT: penguin.

builtin.module {
  penguin.graph @main {
  ^bb0(%x: !penguin.tensor<shared_hbm, 128x256xf32>):
    %y = penguin.kernel_node @softmax(%x) {kind = "internal", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 128x256xf32>) -> !penguin.tensor<shared_hbm, 128x256xf32>
    penguin.graph_return %y : !penguin.tensor<shared_hbm, 128x256xf32>
  }
}
