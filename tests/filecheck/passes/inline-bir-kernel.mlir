// RUN: nkic-opt %s -p inline-bir-kernel | filecheck %s

// An IT54 library ("macro") kernel is already BIR: it is resolved by name from the registry and spliced in,
// its parameters bound to the host's memlocs; no IT55 or separate function appears.
// CHECK: bir.function @main attributes {inputs = ["q"], outputs = ["r"]} {
// CHECK-NEXT: bir.memloc @q : shared_hbm [128, 256] float32 {kind = "input"}
// CHECK-NEXT: bir.memloc @r : shared_hbm [128, 256] float32 {kind = "output"}
// CHECK: bir.loop "L0" "affine" 0 to 1 step 1 {
// CHECK-NEXT: bir.dma_copy dst @softmax.{{.*}}, src @q[0 + 32768*i0 : [256, 128], [1, 256]]
// CHECK: bir.tensor_reduce {{.*}}negate = true
// CHECK: bir.activation {{.*}}bias @softmax.{{.*}}func = "exp"
// CHECK: bir.dma_copy dst @r[0 + 32768*i0 : [256, 128], [1, 256]]
// CHECK-NOT: bir.bir_kernel
// CHECK-NOT: bir.nki_kernel

builtin.module {
  bir.function @main attributes {inputs = ["q"], outputs = ["r"]} {
    bir.memloc @q : shared_hbm [128, 256] float32 {kind = "input"}
    bir.memloc @r : shared_hbm [128, 256] float32 {kind = "output"}
    bir.bir_kernel {kernel_name = "softmax", srcs_shape = [array<i64: 128, 256>], dsts_shape = [array<i64: 128, 256>], kernel_attrs = "{\22dtype\22: \22float32\22}", func_args = {x = "q"}, func_outs = {out = "r"}, grid = 1 : i64, lnc_size = 1 : i64}
  }
}
