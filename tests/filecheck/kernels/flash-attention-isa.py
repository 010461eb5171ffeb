# RUN: %python %s | filecheck %s
# The flash-attention kernel after the whole pipeline (nkic-pipeline): per-engine ISA streams. Matmuls and the exp
# transposes (bf16 in PSUM) run on PE; ACT scales the masked score tiles out of PSUM, runs the bias-folded exp and
# the normalisation; the causal affine_select on POOL; the maxes and the 2-byte PSUM copies of exp^T on DVE; the
# (transposing) DMAs on SP. Semaphores order them: MM1 waits for the K and Q DMA queues, the output store waits
# for ACT's normalisation.
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.passes import get_all_passes

spec = TensorSpec((1, 256, 64), "bfloat16")
module = flash_attention.trace(spec, spec, spec, scale=0.125).module.clone()
get_all_passes()["nkic-pipeline"]()().apply(make_context(), module)
module.verify()
print(module)

# CHECK: isa.core @sg00 {
# CHECK-NEXT: isa.var @q : input [1, 256, 64] bfloat16 {var_id = [[Q:[0-9]+]] : i64}
# CHECK-NEXT: isa.var @k : input [1, 256, 64] bfloat16 {var_id = [[K:[0-9]+]] : i64}
# CHECK-NEXT: isa.var @v : input [1, 256, 64] bfloat16 {var_id = [[V:[0-9]+]] : i64}
# CHECK-NEXT: isa.var @out : output [1, 256, 64] bfloat16 {var_id = [[OUT:[0-9]+]] : i64}

# CHECK-LABEL: isa.stream "pe" {
# MM1 of group 0: [q=128, k=128] fp32 in PSUM from Q^T [64, 128] and K^T [64, 128] (bf16): its queries keep only
# the first key block (the causal kernel stops a diagonal tile at the last block any of its queries keeps)
# CHECK: isa_pe.sem_wait {id = [[MM1:[0-9]+]] : i64, wait_sem = [[QSEM:[0-9]+]] : i64, wait_value = 1 : i64}
# CHECK-NEXT: isa_pe.matmul dst psum(p0, {{.*}}, float32)[0 : [1, 128], [1, 128]], stationary sbuf(p0, {{.*}}, bfloat16)[0 : [1, 64], [1, 128]], moving sbuf(p0, {{.*}}, bfloat16)[0 : [1, 64], [1, 128]] {id = [[MM1]] : i64, wait_sem = [[KSEM:[0-9]+]] : i64, wait_value = 1 : i64, signal_sem = {{[0-9]+}} : i64}
# group 1's QK^T comes before group 0's softmax (software pipelining, in a PSUM bank of its own)
# CHECK-NEXT: isa_pe.matmul dst psum(p0, {{.*}}, float32)[0 : [1, 128], [1, 256]], stationary sbuf(p0, {{.*}}, bfloat16)[0 : [1, 64], [1, 128]]
# the exp transposes keep the exp's dtype in PSUM (bf16), after ACT's exp
# CHECK-NEXT: isa_pe.transpose dst psum(p0, {{.*}}, bfloat16)[0 : [1, 128], [1, 128]], src sbuf(p0, {{.*}}, bfloat16)[0 : [1, 128], [1, 128]] {id = {{[0-9]+}} : i64, wait_sem = [[ACTSEM:[0-9]+]] : i64
# MM2: P^T [kv=128, q=128] x V [128, 64]; group 1's second KV block accumulates in PSUM
# CHECK: isa_pe.matmul dst psum(p0, {{.*}}, float32)[0 : [1, 128], [1, 64]], stationary sbuf(p0, {{.*}}, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf
# CHECK: isa_pe.matmul dst psum({{.*}})[0 : [1, 128], [1, 64]], {{.*}}accumulate = true
# CHECK-NOT: isa_pe.activate

# CHECK-LABEL: isa.stream "act" {
# the masked score tile, scaled out of PSUM
# CHECK: isa_act.activate dst sbuf(p0, {{.*}}, float32)[0 : [1, 128], [1, 128]], src psum(p0, {{.*}}, float32)[0 : [1, 128], [1, 128]] {id = {{[0-9]+}} : i64, func = "copy", scale = 1.250000e-01 : f32
# CHECK: isa_act.activate dst sbuf(p0, {{.*}}, bfloat16)[0 : [1, 128], [1, 128]], src sbuf(p0, {{.*}}, float32)[0 : [1, 128], [1, 128]], bias sbuf(p0, {{.*}}, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, {{.*}}, float32)[0 : [1, 128], [1, 1]] {id = {{[0-9]+}} : i64, func = "exp", scale = 1.000000e+00 : f32, reduce_cmd = "reset_reduce", reduce_op = "add", wait_sem = {{[0-9]+}} : i64, wait_value = {{[0-9]+}} : i64, signal_sem = [[ACTSEM]] : i64}
# the normalisation reads O straight from PSUM and writes the output dtype
# CHECK: isa_act.activate dst sbuf(p0, {{.*}}, bfloat16)[0 : [1, 128], [1, 64]], src psum(p0, {{.*}}, float32)[0 : [1, 128], [1, 64]], scale sbuf({{.*}} {id = {{[0-9]+}} : i64, func = "copy"

# CHECK-LABEL: isa.stream "dve" {
# CHECK: isa_dve.tensor_reduce {{.*}}op = "maximum", num_reduced_dims = 1 : i64, negate = true
# CHECK: isa_dve.tensor_copy dst sbuf(p0, {{.*}}, bfloat16){{.*}}, src psum(p0, {{.*}}, bfloat16)
# CHECK: isa_dve.reciprocal

# CHECK-LABEL: isa.stream "pool" {
# CHECK: isa_pool.affine_select dst sbuf(p0, {{.*}}, float32)[0 : [1, 128], [1, 128]], on_true sbuf(p0, {{.*}}, float32)[0 : [1, 128], [1, 128]], pattern none(int32)[0 : [1, 128], [-1, 128]] {id = {{[0-9]+}} : i64, offset = 0 : i64, cmp_op = "greater_equal", on_false_value = -4.25352933e+37 : f32, wait_sem = {{[0-9]+}} : i64
# POOL folds the masked tile in half by maximum for DVE's row max; then group 1's diagonal mask (offset q0 - k0 = 128)
# CHECK-NEXT: isa_pool.tensor_tensor {{.*}}op = "maximum"
# CHECK-NEXT: isa_pool.affine_select {{.*}}pattern none(int32)[0 : [1, 128], [-1, 256]] {id = {{[0-9]+}} : i64, offset = 128 : i64, cmp_op = "greater_equal"

# CHECK-LABEL: isa.stream "sp" {
# CHECK: isa_sp.dma_copy dst sbuf(p0, {{.*}}, bfloat16)[0 : [1, 64], [1, 256]], src hbm(var [[K]], 0x0, bfloat16)[0 : [64, 256], [1, 64]] {id = {{[0-9]+}} : i64, queue = {{[0-9]+}} : i64, transpose = true, signal_sem = [[KSEM]] : i64}
# CHECK-NEXT: isa_sp.dma_copy dst sbuf({{.*}}, src hbm(var [[V]], 0x0, bfloat16)
# CHECK-NEXT: isa_sp.dma_copy dst sbuf(p0, {{.*}}, bfloat16)[0 : [1, 64], [1, 128]], src hbm(var [[Q]], 0x0, bfloat16){{.*}}transpose = true, signal_sem = [[QSEM]] : i64}
# the output store reads the bf16 normalised tile after ACT signals it
# CHECK: isa_sp.dma_copy dst hbm(var [[OUT]], 0x0, bfloat16)[0 : [64, 128], [1, 64]], src sbuf(p0, {{.*}}, bfloat16)[0 : [1, 128], [1, 64]] {id = {{[0-9]+}} : i64, queue = {{[0-9]+}} : i64, wait_sem = [[ACTSEM]] : i64
