// RUN: NKIC_ROUNDTRIP

// CHECK: bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
// CHECK-NEXT: bir.memloc @a : shared_hbm [256, 512] float32 {kind = "input"}
// CHECK-NEXT: bir.memloc @out : shared_hbm [256, 512] float32 {kind = "output"}
// CHECK-NEXT: bir.nki_kernel {func = @k, kernel_source = "Beta3", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64}
// CHECK-NEXT: bir.nki_klir_kernel {kernel_name = "k", kernel_format = "bir", klir_binary = "{}", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64, sb_buf_shape = array<i64: 128, 2048>, psum_buf_shape = array<i64: 128, 0>, nki_binary_version_identifier = "nkic-0.1.0"}
// CHECK-NEXT: bir.bir_kernel {kernel_name = "softmax", srcs_shape = [array<i64: 256, 512>], dsts_shape = [array<i64: 256, 512>], kernel_attrs = "{}", func_args = {x = "a"}, func_outs = {out = "out"}, grid = 1 : i64, is_causal = 0 : i64, lnc_size = 1 : i64}
// CHECK: bir.function @k attributes {inputs = ["a"], outputs = ["out"]} {
// CHECK: bir.memloc @x : sbuf [128, 512] float32 {address = array<i64: 0, 0>, scope = "L0"}
// CHECK-NEXT: bir.loop "L0" "affine" 0 to 2 step 1 {
// CHECK-NEXT: bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @a[0 + 65536*i0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp", queue = 1 : i64, signal = 9 : i64}
// CHECK-NEXT: bir.activation dst @x[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "act", deps = [#bir.dep<flow, 0>], waits = array<i64: 9, 1>, func = "exp"}

builtin.module {
  bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [256, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [256, 512] float32 {kind = "output"}
    bir.nki_kernel {func = @k, kernel_source = "Beta3", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64}
    bir.nki_klir_kernel {kernel_name = "k", kernel_format = "bir", klir_binary = "{}", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64, sb_buf_shape = array<i64: 128, 2048>, psum_buf_shape = array<i64: 128, 0>, nki_binary_version_identifier = "nkic-0.1.0"}
    bir.bir_kernel {kernel_name = "softmax", srcs_shape = [array<i64: 256, 512>], dsts_shape = [array<i64: 256, 512>], kernel_attrs = "{}", func_args = {x = "a"}, func_outs = {out = "out"}, grid = 1 : i64, is_causal = 0 : i64, lnc_size = 1 : i64}
  }
  bir.function @k attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [256, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [256, 512] float32 {kind = "output"}
    bir.memloc @x : sbuf [128, 512] float32 {address = array<i64: 0, 0>, scope = "L0"}
    bir.loop "L0" "affine" 0 to 2 step 1 {
      bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @a[0 + 65536*i0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp", queue = 1 : i64, signal = 9 : i64}
      bir.activation dst @x[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "act", deps = [#bir.dep<flow, 0>], waits = array<i64: 9, 1>, func = "exp"}
      bir.dma_copy dst @out[0 + 65536*i0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp", deps = [#bir.dep<flow, 1>]}
    }
  }
}
