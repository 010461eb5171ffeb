// RUN: nkic-opt %s -p inline-nki-kernel | filecheck %s
// RUN: nkic-opt %s -p inline-nki-kernel,bir-unroll,resolve-psum-accumulate | filecheck %s --check-prefix=UNROLL

// Two calls of one kernel: every traced kernel numbers its loops from L0, and a memloc allocated in a loop names
// it by label (scope). The second copy's loop and its scoped PSUM tile get a label of their own, so bir-unroll
// gives each copy's tile its own per-iteration memlocs and renames each copy's accesses (with both loops labelled
// L0, the second copy's matmuls kept naming @k.acc_1, which unrolling had removed).
// CHECK: bir.memloc @k.acc : psum [128, 512] float32 {scope = "L0"}
// CHECK: bir.memloc @k.acc_1 : psum [128, 512] float32 {scope = "L0_1"}
// CHECK: bir.loop "L0" "affine" 0 to 2 step 1 {
// CHECK-NEXT: bir.matmul dst @k.acc[
// CHECK: bir.loop "L0_1" "affine" 0 to 2 step 1 {
// CHECK-NEXT: bir.matmul dst @k.acc_1[

// UNROLL-NOT: bir.memloc @k.acc_1 :
// UNROLL: bir.memloc @k.acc_1.0 : psum [128, 512] float32
// UNROLL-NEXT: bir.memloc @k.acc_1.1 : psum [128, 512] float32
// UNROLL: bir.matmul dst @k.acc.0[{{.*}}accumulate = false}
// UNROLL-NEXT: bir.matmul dst @k.acc.0[{{.*}}accumulate = true}
// UNROLL: bir.matmul dst @k.acc.1[{{.*}}accumulate = false}
// UNROLL-NEXT: bir.matmul dst @k.acc.1[{{.*}}accumulate = true}
// UNROLL: bir.matmul dst @k.acc_1.0[{{.*}}accumulate = false}
// UNROLL-NEXT: bir.matmul dst @k.acc_1.0[{{.*}}accumulate = true}
// UNROLL-NEXT: bir.tensor_copy dst @k.x_1[{{.*}}], src @k.acc_1.0[
// UNROLL-NEXT: bir.matmul dst @k.acc_1.1[{{.*}}accumulate = false}
// UNROLL-NEXT: bir.matmul dst @k.acc_1.1[{{.*}}accumulate = true}
// UNROLL-NEXT: bir.tensor_copy dst @k.x_1[{{.*}}], src @k.acc_1.1[

builtin.module {
  bir.function @main attributes {inputs = ["in"], outputs = ["r0", "r1"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @r0 : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @r1 : shared_hbm [128, 512] float32 {kind = "output"}
    bir.nki_kernel {func = @k, kernel_source = "Beta3", func_args = {a = "in"}, func_outs = {out = "r0"}, grid = 1 : i64}
    bir.nki_kernel {func = @k, kernel_source = "Beta3", func_args = {a = "in"}, func_outs = {out = "r1"}, grid = 1 : i64}
  }
  bir.function @k attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @acc : psum [128, 512] float32 {scope = "L0"}
    bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.loop "L0" "affine" 0 to 2 step 1 {
      bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @x[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe"}
      bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @x[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "pe"}
      bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @acc[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "act"}
    }
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "sp"}
  }
}
