# RUN: %python %s | filecheck %s
# Traced penguin IR of a small causal flash attention (bs 1, seqlen 256, d 64, bf16, one 256-wide KV tile, two Q
# groups): the online-softmax atoms, software-pipelined (the scores stage of group 1 before the softmax stage of
# group 0), each group with its own buffers; and the second, lower-diagonal affine_select of a sliding window.
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention

spec = TensorSpec((1, 256, 64), "bfloat16")
print(flash_attention.trace(spec, spec, spec, scale=0.125).module)

# CHECK: penguin.kernel @flash_attention
# K^T [d, kv] and V [kv, d] of the KV tile, then Q^T [d, q] of both groups, all by DMA (in first-use order):
# CHECK: penguin.dma_transpose dst %kT[0 : [256, 64], [1, 256]], src %k{{.*}}[0 : [64, 256], [1, 64]]
# CHECK: penguin.dma_copy dst %[[V:[a-z_0-9]+]][0 : [128, 128], [64, 2], [1, 64]], src %v
# CHECK: penguin.dma_transpose dst %qT[0 : [256, 64], [1, 128]], src %q{{.*}}[0 :
# CHECK: penguin.dma_transpose dst %qT[128 : [256, 64], [1, 128]], src %q{{.*}}[8192 :
# group 0's scores stage. MM1 = Q.K^T into one PSUM bank (stationary Q^T, moving K^T), only as far as the last key
# block any of its queries keeps (q0 = 0: the first 128 keys; the rest of the tile is masked for every row):
# CHECK: penguin.matmul dst %qk_psum[0 : [512, 128], [1, 128]], stationary %qT[0 : [256, 64], [1, 128]], moving %kT[0 : [256, 64], [1, 128]]
# a masked (diagonal) tile: ScalarE scales it out of PSUM, GpSimd masks it, folds it in half by maximum and VectorE
# takes the partial row max of the half
# CHECK-NEXT: penguin.activation dst %scores[{{.*}}], data %qk_psum[{{.*}}] {{{.*}}func = "copy", scale = 1.250000e-01 : f32
# the causal iota triangle: keep (q0 + p) - (k0 + i) >= 0, else FLOAT32_MIN (times the scale: the tile is scaled)
# CHECK-NEXT: penguin.affine_select dst %scores[{{.*}}], on_true %scores[{{.*}}] {{{.*}}pattern = #nkic.ap<0 : [-1, 128]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal", on_false_value = -4.25352933e+37 : f32}
# CHECK: penguin.tensor_tensor dst %max_fold[0 : [64, 128], [1, 64]], data1 %scores[0 : [512, 128], [1, 64]], data2 %scores[64 : [512, 128], [1, 64]] {{{.*}}op = "maximum", engine = "gpsimd"}
# CHECK-NEXT: penguin.tensor_reduce dst %partial_max[{{.*}}], data %max_fold[{{.*}}] {{{.*}}op = "maximum", axes = array<i64: 1>, negate = false
# the negated running max:
# CHECK-NEXT: penguin.tensor_reduce dst %[[NEG_MAX:neg_max_b0_g0]][{{.*}}], data %partial_max[{{.*}}] {{{.*}}op = "maximum", axes = array<i64: 1>, negate = true
# group 1's scores stage comes next (q0 = 128: its mask offset is q0 - k0 = 128), in buffers of its own
# CHECK: penguin.matmul dst %qk_psum_1[{{.*}}], stationary %qT[128 : [256, 64], [1, 128]], moving %kT
# CHECK: penguin.affine_select dst %scores_1{{.*}}pattern = #nkic.ap<128 : [-1, 256]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal"
# CHECK: penguin.tensor_reduce dst %neg_max_b0_g1
# then group 0's softmax stage: exp(S - max) and its row sum in one activation, the negated max as bias
# CHECK: penguin.activation dst %exp[{{.*}}], data %scores[{{.*}}], bias %[[NEG_MAX]][0 : [1, 128], [1, 1]], reduce_res %exp_partial_sum[{{.*}}] {{{.*}}func = "exp", scale = 1.000000e+00 : f32, reduce_op = "add", reduce_cmd = "reset_reduce"}
# exp^T through PSUM in bf16 (a PE transpose keeps the dtype), one 2-byte copy out, then MM2 = P.V
# CHECK: penguin.transpose dst %expT_psum[0 : [512, 128], [1, 128]], data %exp[0 : [512, 128], [1, 128]]
# CHECK: penguin.tensor_copy dst %expT[{{.*}}], src %expT_psum{{.*}}engine = "vector"
# CHECK-NEXT: penguin.matmul dst %pv_psum[0 : [64, 128], [1, 64]], stationary %expT[0 : [512, 128], [1, 128]], moving %[[V]][0 : [128, 128], [1, 64]]
# CHECK: penguin.tensor_reduce dst %sum_b0_g0[{{.*}}], data %exp_partial_sum[{{.*}}] {{{.*}}op = "add"
# normalise by 1/l straight out of PSUM into the output dtype, and store:
# CHECK: penguin.reciprocal dst %inv_sum[{{.*}}], data %sum_b0_g0
# CHECK: penguin.activation dst %o_final[{{.*}}], data %pv_psum[{{.*}}], scale %inv_sum[{{.*}}] {{{.*}}func = "copy"
# CHECK-NEXT: penguin.dma_copy dst %out[0 : [64, 128], [1, 64]], src %o_final
# CHECK: penguin.activation {{.*}}bias %neg_max_b0_g1{{.*}}func = "exp"
# CHECK: penguin.dma_copy dst %out[8192 : [64, 128], [1, 64]]
# CHECK: penguin.return %out

print("// ----- sliding window 100")
print(flash_attention.trace(spec, spec, spec, scale=0.125, sliding_window=100).module)
# keep q - k < 100, i.e. 99 - (q0 + p) + (k0 + i) >= 0, after the causal mask of the same tile
# CHECK-LABEL: // ----- sliding window 100
# (group 0's tile stops at its first 128 keys, group 1's spans both blocks)
# CHECK: penguin.affine_select {{.*}}pattern = #nkic.ap<0 : [-1, 128]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal"
# CHECK-NEXT: penguin.affine_select {{.*}}pattern = #nkic.ap<99 : [1, 128]>, channel_multiplier = -1 : i64, cmp_op = "greater_equal", on_false_value = -4.25352933e+37 : f32}
# CHECK: penguin.affine_select {{.*}}pattern = #nkic.ap<128 : [-1, 256]>
# CHECK-NEXT: penguin.affine_select {{.*}}pattern = #nkic.ap<-29 : [1, 256]>, channel_multiplier = -1 : i64
