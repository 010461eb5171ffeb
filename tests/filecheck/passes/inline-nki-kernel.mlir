// RUN: nkic-opt %s -p inline-nki-kernel | filecheck %s

// The IT55 call-site and the kernel function are gone; the body is spliced into @main with the kernel's
// parameters rebound through func_args/func_outs, its internal tensors renamed and its ids shifted.
// CHECK: bir.function @main attributes {inputs = ["in"], outputs = ["res"]} {
// CHECK-NEXT: bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
// CHECK-NEXT: bir.memloc @res : shared_hbm [128, 512] float32 {kind = "output"}
// CHECK-NEXT: bir.memloc @k.t : sbuf [128, 512] float32
// CHECK-NEXT: bir.memset dst @res[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "dve", value = 0.000000e+00 : f32}
// CHECK-NEXT: bir.dma_copy dst @k.t[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp"}
// CHECK-NEXT: bir.dma_copy dst @res[0 : [512, 128], [1, 512]], src @k.t[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp", deps = [#bir.dep<flow, 1>]}
// CHECK-NEXT: }
// CHECK-NOT: bir.nki_kernel
// CHECK-NOT: @k attributes

builtin.module {
  bir.function @main attributes {inputs = ["in"], outputs = ["res"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @res : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memset dst @res[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    bir.nki_kernel {func = @k, kernel_source = "Beta3", func_args = {a = "in"}, func_outs = {out = "res"}, grid = 1 : i64}
  }
  bir.function @k attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @t : sbuf [128, 512] float32
    bir.dma_copy dst @t[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @t[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp", deps = [#bir.dep<flow, 0>]}
  }
}
