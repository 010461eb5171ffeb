# RUN: %python %s | filecheck %s
# The flash-attention kernel through the three BIR carrier stages (worked example B, Stage 4a): penguin-to-bir
# wraps the traced body into an IT56 bir.nki_klir_kernel carrying BIR-JSON (kernel_format "bir");
# translate-nki-ast-to-bir turns it into an IT55 bir.nki_kernel call-site (Beta3) plus a separate NKI bir.function;
# inline-nki-kernel splices that body into @main, leaving neither carrier.
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.passes import get_all_passes

spec = TensorSpec((1, 256, 64), "bfloat16")
module = flash_attention.trace(spec, spec, spec, scale=0.125).module.clone()
ctx, passes = make_context(), get_all_passes()
for stage in ("penguin-to-bir", "translate-nki-ast-to-bir", "inline-nki-kernel"):
    passes[stage]()().apply(ctx, module)
    module.verify()
    print(f"// ----- after {stage}")
    print(module)

# CHECK-LABEL: // ----- after penguin-to-bir
# CHECK: bir.function @main attributes {inputs = ["q", "k", "v"], outputs = ["out"]} {
# CHECK: bir.memloc @out : shared_hbm [1, 256, 64] bfloat16 {kind = "output"}
# CHECK-NEXT: bir.nki_klir_kernel {kernel_name = "flash_attention", kernel_format = "bir", klir_binary = "{{.*}}", func_args = {q = "q", k = "k", v = "v"}, func_outs = {out = "out"}, grid = 1 : i64, sb_buf_shape = array<i64: 128, {{[0-9]+}}>, psum_buf_shape = array<i64: 128, {{[0-9]+}}>
# CHECK-NOT: bir.function
# CHECK-NOT: bir.matmul

# CHECK-LABEL: // ----- after translate-nki-ast-to-bir
# CHECK: bir.function @main
# CHECK: bir.nki_kernel {func = @flash_attention, kernel_source = "Beta3", func_args = {q = "q", k = "k", v = "v"}, func_outs = {out = "out"}, grid = 1 : i64}
# CHECK-NOT: bir.nki_klir_kernel
# CHECK: bir.function @flash_attention attributes {inputs = ["q", "k", "v"], outputs = ["out"]} {
# CHECK: bir.memloc @neg_max_b0_g0 : sbuf [128, 1] float32
# CHECK: bir.dma_transpose dst @kT[{{.*}}], src @k[
# CHECK: bir.matmul dst @qk_psum[{{.*}}], stationary @qT[{{.*}}], moving @kT[
# (attribute order is the printer's business: each line checks one distinctive attribute)
# (group 0 masks only its first key block: its queries keep no later key)
# CHECK: bir.affine_select dst @scores[{{.*}}pattern = #nkic.ap<0 : [-1, 128]>
# CHECK: bir.tensor_reduce dst @neg_max_b0_g0[{{.*}}negate = true
# CHECK: bir.activation dst @exp[{{.*}}], data @scores[{{.*}}], bias @neg_max_b0_g0[{{.*}}func = "exp"
# CHECK: bir.matmul dst @pv_psum[{{.*}}], stationary @expT[

# CHECK-LABEL: // ----- after inline-nki-kernel
# CHECK-NOT: bir.nki_kernel
# CHECK-NOT: bir.nki_klir_kernel
# CHECK: bir.function @main
# CHECK-NOT: bir.nki_kernel
# CHECK-NOT: bir.function @flash_attention
# CHECK: bir.memloc @flash_attention.neg_max_b0_g0 : sbuf [128, 1] float32
# CHECK: bir.tensor_reduce dst @flash_attention.neg_max_b0_g0[{{.*}}negate = true
# CHECK: bir.activation dst @flash_attention.exp[{{.*}}bias @flash_attention.neg_max_b0_g0[{{.*}}func = "exp"
# CHECK: bir.dma_copy dst @out[
# CHECK-NOT: bir.function
# CHECK-NOT: bir.nki_kernel
