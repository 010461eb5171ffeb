// RUN: nkic-opt %s -p translate-nki-ast-to-bir | filecheck %s
// RUN: nkic-opt %S/Inputs/add-kernel.mlir -p 'penguin-to-bir{kernel_format=klir}' | filecheck %s --check-prefix=FORMA
// RUN: nkic-opt %S/Inputs/add-kernel.mlir -p 'penguin-to-bir{kernel_format=klir}' | nkic-opt -p translate-nki-ast-to-bir | filecheck %s --check-prefix=BETA2
// RUN: nkic-opt %S/Inputs/add-kernel.mlir -p 'penguin-to-bir{kernel_format=bir}' | nkic-opt -p translate-nki-ast-to-bir | filecheck %s --check-prefix=BETA3

// FORM B: the embedded BIR JSON becomes a separate function and the IT56 an IT55 call-site (Beta3).
// CHECK: bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
// CHECK: bir.nki_kernel {func = @k, kernel_source = "Beta3", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64}
// CHECK-NOT: bir.nki_klir_kernel
// CHECK: bir.function @k attributes {inputs = ["a"], outputs = ["out"]} {
// CHECK-NEXT: bir.memloc @a : shared_hbm [128, 64] float32 {kind = "input"}
// CHECK: bir.memset dst @out[0 : [64, 128], [1, 64]] {engine = "dve", id = 0 : i64, value = 1.000000e+00 : f32}

// FORM A carries the traced kernel as an inline NKAB binary; translating it walks the AST into BIR (Beta2).
// FORMA: bir.nki_klir_kernel {kernel_name = "k", kernel_format = "klir", klir_binary = "data:application/x-nkab;base64,TktBQg{{.*}}"
// BETA2: bir.nki_kernel {func = @k, kernel_source = "Beta2"
// BETA2: bir.function @k
// BETA2: bir.tensor_tensor
// BETA3: bir.nki_kernel {func = @k, kernel_source = "Beta3"

builtin.module {
  bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [128, 64] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 64] float32 {kind = "output"}
    bir.nki_klir_kernel {kernel_name = "k", kernel_format = "bir", klir_binary = "{\22body\22:[{\22op\22:\22bir.memloc\22,\22props\22:{\22dtype\22:\22float32\22,\22kind\22:\22input\22,\22memory\22:\22shared_hbm\22,\22shape\22:{\22i64\22:[128,64]},\22sym_name\22:\22a\22}},{\22op\22:\22bir.memloc\22,\22props\22:{\22dtype\22:\22float32\22,\22kind\22:\22output\22,\22memory\22:\22shared_hbm\22,\22shape\22:{\22i64\22:[128,64]},\22sym_name\22:\22out\22}},{\22op\22:\22bir.memset\22,\22props\22:{\22aps\22:[{\22ap\22:[0,[],[[64,128],[1,64]]]}],\22engine\22:\22dve\22,\22id\22:0,\22refs\22:[\22out\22],\22roles\22:[\22dst\22],\22value\22:{\22f32\22:1.0}}}],\22format\22:\22nkic-bir-json/1\22,\22op\22:\22bir.function\22,\22props\22:{\22inputs\22:[\22a\22],\22outputs\22:[\22out\22],\22sym_name\22:\22k\22}}", func_args = {a = "a"}, func_outs = {out = "out"}, grid = 1 : i64, sb_buf_shape = array<i64: 128, 0>, psum_buf_shape = array<i64: 128, 0>, nki_binary_version_identifier = "nkic-0.1.0"}
  }
}
