// RUN: nkic-opt %s --split-input-file --print-op-generic | nkic-opt --split-input-file | filecheck %s

// Every op of every ISA engine dialect, printed in its custom syntax and read back through the generic form.

// CHECK: builtin.module {
// CHECK-NEXT: isa.core @sg00 {
// CHECK-NEXT: isa.var @a : input [128, 512] float32 {var_id = 0 : i64}
// CHECK-NEXT: isa.var @out : output [128, 512] float32 {var_id = 1 : i64}
// CHECK-NEXT: isa.var @scratch : tmp-buf [64] int32 {var_id = 2 : i64}
// CHECK-NEXT: isa.stream "sp" {
// CHECK-NEXT: isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 0 : i64, queue = 0 : i64, signal_sem = 8 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst sbuf(p0, 0x4000, float32)[0 : [1, 64], [1, 32]], src hbm(var 0, 0x80, float32)[0 : [512, 32], [1, 64]] {id = 1 : i64, queue = 1 : i64, transpose = true, signal_sem = 9 : i64}
// CHECK-NEXT: isa_sp.sem_wait {id = 2 : i64, wait_sem = 2 : i64, wait_value = 3 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src sbuf(p0, 0x2000, float32)[0 : [1, 128], [1, 512]] {id = 3 : i64, queue = 2 : i64, signal_sem = 10 : i64}
// CHECK-NEXT: isa_sp.dma_compute dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src0 hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]], src1 sbuf(p0, 0x2000, float32)[0 : [1, 128], [1, 512]] {id = 42 : i64, queue = 3 : i64, reduce_op = "add", signal_sem = 11 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 64], [1, 512] + 512*vector src_offset], src_offset sbuf(p0, 0x8000, int32)[0 : [1, 64], [1, 1]] {id = 43 : i64, queue = 0 : i64, oob_skip = true, signal_sem = 8 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst hbm(var 1, 0x0, float32)[0 : [512, 2], [1, 512] + 512*dst_offset], src sbuf(p0, 0x0, float32)[0 : [1, 2], [1, 512]], dst_offset hbm(var 2, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 44 : i64, queue = 1 : i64, signal_sem = 9 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 1], [1, 4]], src hbm(var 0, 0x0, float32)[0 : [4, 1], [1, 4] + 1*r7] {id = 45 : i64, queue = 2 : i64, signal_sem = 10 : i64}
// CHECK-NEXT: isa_sp.dma_compute dst sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src0 hbm(var 0, 0x0, float32)[0 : [512, 64], [1, 512] + 512*vector src3], src1 sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src3 sbuf(p0, 0x8000, int32)[0 : [1, 64], [1, 1]] {id = 46 : i64, queue = 3 : i64, reduce_op = "add", oob_skip = true, signal_sem = 11 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "pe" {
// CHECK-NEXT: isa_pe.sem_wait {id = 4 : i64, wait_sem = 8 : i64, wait_value = 1 : i64}
// CHECK-NEXT: isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 5 : i64, accumulate = true, signal_sem = 0 : i64}
// CHECK-NEXT: isa_pe.matmul dst psum(p32, 0x0, float32)[0 : [1, 32], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 32]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 7 : i64, tile_col = 32 : i64, tile_rows = 128 : i64, tile_cols = 32 : i64, is_transpose = true, is_stationary_onezero = true}
// CHECK-NEXT: isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 16], [1, 512]], stationary sbuf(p0, 0x0, float8_e4m3)[0 : [1, 128], [16, 2], [1, 16]], moving sbuf(p0, 0x100, float8_e5m2)[0 : [1, 128], [512, 2], [1, 512]] {id = 8 : i64, double_row = true}
// CHECK-NEXT: isa_pe.transpose dst psum(p0, 0x800, float32)[0 : [1, 64], [1, 128]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 6 : i64, wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 0 : i64}
// CHECK-NEXT: isa_pe.matmul_mx dst psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], stationary sbuf(p0, 0x0, float8_e4m3fn_x4)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x200, float4_e2m1fn_x4)[0 : [1, 128], [1, 512]], stationary_scale sbuf(p0, 0x1000, float8_e8m0fnu)[0 : [1, 128], [1, 128]], moving_scale sbuf(p0, 0x1100, uint8)[0 : [1, 128], [1, 512]] {id = 42 : i64, accumulate = true}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "act" {
// CHECK-NEXT: isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 7 : i64, func = "exp", scale = 5.000000e-01 : f32, bias = -1.000000e+00 : f32, wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}
// CHECK-NEXT: isa_act.activate dst sbuf(p0, 0x800, bfloat16)[0 : [1, 128], [2, 256]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 256]], bias sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], scale sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 8 : i64, func = "gelu_apprx_tanh", reduce_cmd = "reset_reduce", reduce_op = "add", signal_sem = 1 : i64}
// CHECK-NEXT: isa_act.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 10 : i64, op0 = "multiply", operand0 = 2.000000e+00 : f32, op1 = "add", operand1 = 0.000000e+00 : f32, reverse1 = true}
// CHECK-NEXT: isa_act.tensor_copy dst sbuf(p64, 0x800, bfloat16)[0 : [1, 64], [1, 16], [1, 32]], src sbuf(p0, 0x0, float32)[0 : [1, 64], [32, 16], [1, 32]] {id = 11 : i64}
// CHECK-NEXT: isa_act.activate2 dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], imm0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], relu_param sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 72 : i64, func = "prelu", op0 = "multiply", op1 = "subtract", imm1 = 5.000000e-01 : f32, reduce_cmd = "reset_reduce", reduce_op = "abs_max", reverse1 = true}
// CHECK-NEXT: isa_act.activate2 dst sbuf(p0, 0x800, bfloat16)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 73 : i64, func = "silu_dx", op0 = "bypass", op1 = "bypass"}
// CHECK-NEXT: isa_act.sem_wait {id = 13 : i64, wait_sem = 0 : i64, wait_value = 2 : i64, signal_sem = 1 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "dve" {
// CHECK-NEXT: isa_dve.tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 14 : i64, op = "maximum", signal_sem = 2 : i64}
// CHECK-NEXT: isa_dve.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 15 : i64, op0 = "subtract", reverse0 = true}
// CHECK-NEXT: isa_dve.tensor_reduce dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 4]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [128, 4], [1, 128]] {id = 16 : i64, op = "maximum", num_reduced_dims = 1 : i64, negate = true}
// CHECK-NEXT: isa_dve.tensor_copy dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 17 : i64}
// CHECK-NEXT: isa_dve.tensor_copy dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 64]], src psum(p32, 0x0, float32)[0 : [1, 32], [2, 64] + 2*indirect src_offset], src_offset sbuf(p32, 0x4000, int32)[0 : [1, 32], [1, 2]] {id = 90 : i64}
// CHECK-NEXT: isa_dve.memset dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 18 : i64, value = 0.000000e+00 : f32}
// CHECK-NEXT: isa_dve.reciprocal dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 19 : i64}
// CHECK-NEXT: isa_dve.tensor_scalar_reduce dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], reduce_res sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 20 : i64, op0 = "multiply", operand0 = 2.500000e-01 : f32, reduce_op = "add", negate = true}
// CHECK-NEXT: isa_dve.scalar_tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], data sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], operand1 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 21 : i64, op0 = "subtract", op1 = "multiply", reverse0 = true, reverse1 = true}
// CHECK-NEXT: isa_dve.transpose dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 32]], src sbuf(p32, 0x0, float32)[0 : [1, 32], [1, 32]] {id = 22 : i64}
// CHECK-NEXT: isa_dve.range_select dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], on_true psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], bound0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], bound1 sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 33 : i64, comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.000000e+04 : f32, range_start = 7 : i64, reduce_cmd = "reset_reduce", reduce_op = "maximum"}
// CHECK-NEXT: isa_dve.tensor_tensor_scan dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 34 : i64, op0 = "multiply", op1 = "add", initial = 1.000000e+00 : f32, reverse0 = true}
// CHECK-NEXT: isa_dve.tensor_copy_predicated dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], predicate sbuf(p0, 0x2000, uint8)[0 : [1, 128], [1, 512]] {id = 35 : i64, reverse_pred = true}
// CHECK-NEXT: isa_dve.bn_stats dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 6]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 36 : i64}
// CHECK-NEXT: isa_dve.bn_aggr dst sbuf(p0, 0x3100, float32)[0 : [1, 128], [1, 2]], src sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 6]] {id = 37 : i64}
// CHECK-NEXT: isa_dve.exponential dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 38 : i64, max_value = 2.000000e+00 : f32, reduce_cmd = "reset_reduce"}
// CHECK-NEXT: isa_dve.select_reduce dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], predicate sbuf(p0, 0x2000, uint8)[0 : [1, 128], [1, 512]], on_true psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], on_false sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]] {id = 39 : i64, reduce_cmd = "reset_reduce", reduce_op = "maximum", reverse_pred = true}
// CHECK-NEXT: isa_dve.tensor_scalar_cumulative dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 40 : i64, op0 = "add", op1 = "maximum", imm0 = 1.000000e+00 : f32, reduce_cmd = "reset_reduce"}
// CHECK-NEXT: isa_dve.set_rng_seed src sbuf(p0, 0x3200, int32)[0 : [1, 1], [1, 1]] {id = 42 : i64}
// CHECK-NEXT: isa_dve.rng dst sbuf(p0, 0x3300, uint16)[0 : [1, 128], [1, 64]] {id = 43 : i64}
// CHECK-NEXT: isa_dve.rand2 dst psum(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]], max sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 44 : i64, min = -1.000000e+00 : f32}
// CHECK-NEXT: isa_dve.dropout dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 45 : i64, prob = 1.000000e-01 : f32}
// CHECK-NEXT: isa_dve.rand_set_state src sbuf(p0, 0x3400, uint32)[0 : [1, 128], [1, 24]] {id = 46 : i64}
// CHECK-NEXT: isa_dve.rand_get_state dst psum(p0, 0x0, uint32)[0 : [1, 128], [1, 24]] {id = 47 : i64}
// CHECK-NEXT: isa_dve.max8 dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 8]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 42 : i64}
// CHECK-NEXT: isa_dve.find_index8 dst sbuf(p0, 0x3100, uint16)[0 : [1, 128], [1, 8]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [4, 128], [1, 4]], vals sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 8]] {id = 43 : i64}
// CHECK-NEXT: isa_dve.match_replace8 dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], vals sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 8]], dst_idx sbuf(p0, 0x3200, uint32)[0 : [1, 128], [1, 8]] {id = 44 : i64, imm = -1.000000e+00 : f32}
// CHECK-NEXT: isa_dve.nc_stream_shuffle dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 32], [1, 512]] {id = 46 : i64, mask0 = 33619999 : i64, mask1 = 100992003 : i64, mask2 = 168364039 : i64, mask3 = 235736075 : i64, mask4 = 303108111 : i64, mask5 = 370480147 : i64, mask6 = 437852183 : i64, mask7 = 4280097819 : i64}
// CHECK-NEXT: isa_dve.quantize_mx dst sbuf(p0, 0x4000, float8_e5m2_x4)[0 : [1, 128], [1, 128]], src sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]], dst_scale sbuf(p0, 0x4200, float8_e8m0fnu)[0 : [1, 128], [1, 128]] {id = 43 : i64}
// CHECK-NEXT: isa_dve.sem_wait {id = 23 : i64, wait_sem = 3 : i64, wait_value = 1 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "pool" {
// CHECK-NEXT: isa_pool.tensor_tensor dst sbuf(p0, 0x800, int32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 512]], in1 sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 512]] {id = 24 : i64, op = "bitwise_xor", signal_sem = 3 : i64}
// CHECK-NEXT: isa_pool.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], operand1 sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]] {id = 25 : i64, op0 = "rsqrt", op1 = "bypass"}
// CHECK-NEXT: isa_pool.tensor_copy dst sbuf(p0, 0x800, float16)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 27 : i64}
// CHECK-NEXT: isa_pool.memset dst sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]] {id = 28 : i64, value = 1.000000e+00 : f32}
// CHECK-NEXT: isa_pool.iota dst sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 64]], pattern none(int32)[0 : [64, 128], [1, 64]] {id = 29 : i64, offset = -3 : i64}
// CHECK-NEXT: isa_pool.affine_select dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 128]], on_true sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 128]], pattern none(int32)[0 : [1, 128], [-1, 128]] {id = 30 : i64, cmp_op = "greater_equal", on_false_value = -3.000000e+04 : f32}
// CHECK-NEXT: isa_pool.tensor_partition_reduce dst sbuf(p0, 0x800, float32)[0 : [1, 1], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 41 : i64, op = "maximum"}
// CHECK-NEXT: isa_pool.rng dst sbuf(p0, 0x3300, int8)[0 : [1, 128], [1, 64]] {id = 48 : i64}
// CHECK-NEXT: isa_pool.rand_set_state src sbuf(p0, 0x3400, uint32)[0 : [1, 128], [1, 6]] {id = 49 : i64}
// CHECK-NEXT: isa_pool.rand_get_state dst sbuf(p0, 0x3400, uint32)[0 : [1, 128], [1, 6]] {id = 50 : i64}
// CHECK-NEXT: isa_pool.nonzero_with_count dst sbuf(p0, 0x4000, int32)[0 : [1, 128], [1, 513]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 45 : i64, index_offset = 512 : i64}
// CHECK-NEXT: isa_pool.topk dst sbuf(p0, 0x5000, bfloat16)[0 : [1, 128], [1, 64]], idx_dst sbuf(p0, 0x5100, uint32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x6000, bfloat16)[0 : [1, 128], [1, 256]] {id = 46 : i64, n = 4000 : i64}
// CHECK-NEXT: isa_pool.local_gather dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 128]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], index sbuf(p0, 0x3000, uint16)[0 : [1, 128], [1, 4]] {id = 43 : i64, num_elem_per_idx = 2 : i64, num_valid_indices = 64 : i64}
// CHECK-NEXT: isa_pool.nc_n_gather dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 16]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], indices sbuf(p0, 0x3000, uint32)[0 : [1, 128], [1, 16]] {id = 44 : i64}
// CHECK-NEXT: isa_pool.sequence_bounds dst sbuf(p0, 0x800, int32)[0 : [1, 1], [64, 2], [1, 64]], src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 64]] {id = 45 : i64}
// CHECK-NEXT: isa_pool.sem_wait {id = 32 : i64, wait_sem = 9 : i64, wait_value = 1 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

builtin.module {
  isa.core @sg00 {
    isa.var @a : input [128, 512] float32 {var_id = 0 : i64}
    isa.var @out : output [128, 512] float32 {var_id = 1 : i64}
    isa.var @scratch : tmp-buf [64] int32 {var_id = 2 : i64}
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 0 : i64, queue = 0 : i64, signal_sem = 8 : i64}
      isa_sp.dma_copy dst sbuf(p0, 0x4000, float32)[0 : [1, 64], [1, 32]], src hbm(var 0, 0x80, float32)[0 : [512, 32], [1, 64]] {id = 1 : i64, queue = 1 : i64, transpose = true, signal_sem = 9 : i64}
      isa_sp.sem_wait {id = 2 : i64, wait_sem = 2 : i64, wait_value = 3 : i64}
      isa_sp.dma_copy dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src sbuf(p0, 0x2000, float32)[0 : [1, 128], [1, 512]] {id = 3 : i64, queue = 2 : i64, signal_sem = 10 : i64}
      isa_sp.dma_compute dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src0 hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]], src1 sbuf(p0, 0x2000, float32)[0 : [1, 128], [1, 512]] {id = 42 : i64, queue = 3 : i64, reduce_op = "add", signal_sem = 11 : i64}
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 64], [1, 512] + 512*vector src_offset], src_offset sbuf(p0, 0x8000, int32)[0 : [1, 64], [1, 1]] {id = 43 : i64, queue = 0 : i64, oob_skip = true, signal_sem = 8 : i64}
      isa_sp.dma_copy dst hbm(var 1, 0x0, float32)[0 : [512, 2], [1, 512] + 512*dst_offset], src sbuf(p0, 0x0, float32)[0 : [1, 2], [1, 512]], dst_offset hbm(var 2, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 44 : i64, queue = 1 : i64, signal_sem = 9 : i64}
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 1], [1, 4]], src hbm(var 0, 0x0, float32)[0 : [4, 1], [1, 4] + 1*r7] {id = 45 : i64, queue = 2 : i64, signal_sem = 10 : i64}
      isa_sp.dma_compute dst sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src0 hbm(var 0, 0x0, float32)[0 : [512, 64], [1, 512] + 512*vector src3], src1 sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src3 sbuf(p0, 0x8000, int32)[0 : [1, 64], [1, 1]] {id = 46 : i64, queue = 3 : i64, reduce_op = "add", oob_skip = true, signal_sem = 11 : i64}
    }
    isa.stream "pe" {
      isa_pe.sem_wait {id = 4 : i64, wait_sem = 8 : i64, wait_value = 1 : i64}
      isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 5 : i64, accumulate = true, signal_sem = 0 : i64}
      isa_pe.matmul dst psum(p32, 0x0, float32)[0 : [1, 32], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 32]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 7 : i64, tile_col = 32 : i64, tile_rows = 128 : i64, tile_cols = 32 : i64, is_transpose = true, is_stationary_onezero = true}
      isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 16], [1, 512]], stationary sbuf(p0, 0x0, float8_e4m3)[0 : [1, 128], [16, 2], [1, 16]], moving sbuf(p0, 0x100, float8_e5m2)[0 : [1, 128], [512, 2], [1, 512]] {id = 8 : i64, double_row = true}
      isa_pe.transpose dst psum(p0, 0x800, float32)[0 : [1, 64], [1, 128]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 6 : i64, wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 0 : i64}
      isa_pe.matmul_mx dst psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], stationary sbuf(p0, 0x0, float8_e4m3fn_x4)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x200, float4_e2m1fn_x4)[0 : [1, 128], [1, 512]], stationary_scale sbuf(p0, 0x1000, float8_e8m0fnu)[0 : [1, 128], [1, 128]], moving_scale sbuf(p0, 0x1100, uint8)[0 : [1, 128], [1, 512]] {id = 42 : i64, accumulate = true}
    }
    isa.stream "act" {
      isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 7 : i64, func = "exp", scale = 5.000000e-01 : f32, bias = -1.000000e+00 : f32, wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}
      isa_act.activate dst sbuf(p0, 0x800, bfloat16)[0 : [1, 128], [2, 256]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 256]], bias sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], scale sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 8 : i64, func = "gelu_apprx_tanh", reduce_cmd = "reset_reduce", reduce_op = "add", signal_sem = 1 : i64}
      isa_act.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 10 : i64, op0 = "multiply", operand0 = 2.000000e+00 : f32, op1 = "add", operand1 = 0.000000e+00 : f32, reverse1 = true}
      isa_act.tensor_copy dst sbuf(p64, 0x800, bfloat16)[0 : [1, 64], [1, 16], [1, 32]], src sbuf(p0, 0x0, float32)[0 : [1, 64], [32, 16], [1, 32]] {id = 11 : i64}
      isa_act.activate2 dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], imm0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], relu_param sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 72 : i64, func = "prelu", op0 = "multiply", op1 = "subtract", imm1 = 5.000000e-01 : f32, reduce_cmd = "reset_reduce", reduce_op = "abs_max", reverse1 = true}
      isa_act.activate2 dst sbuf(p0, 0x800, bfloat16)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 73 : i64, func = "silu_dx", op0 = "bypass", op1 = "bypass"}
      isa_act.sem_wait {id = 13 : i64, wait_sem = 0 : i64, wait_value = 2 : i64, signal_sem = 1 : i64}
    }
    isa.stream "dve" {
      isa_dve.tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 14 : i64, op = "maximum", signal_sem = 2 : i64}
      isa_dve.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 15 : i64, op0 = "subtract", reverse0 = true}
      isa_dve.tensor_reduce dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 4]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [128, 4], [1, 128]] {id = 16 : i64, op = "maximum", num_reduced_dims = 1 : i64, negate = true}
      isa_dve.tensor_copy dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 17 : i64}
      isa_dve.tensor_copy dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 64]], src psum(p32, 0x0, float32)[0 : [1, 32], [2, 64] + 2*indirect src_offset], src_offset sbuf(p32, 0x4000, int32)[0 : [1, 32], [1, 2]] {id = 90 : i64}
      isa_dve.memset dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 18 : i64, value = 0.000000e+00 : f32}
      isa_dve.reciprocal dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 19 : i64}
      isa_dve.tensor_scalar_reduce dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], reduce_res sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 20 : i64, op0 = "multiply", operand0 = 2.500000e-01 : f32, reduce_op = "add", negate = true}
      isa_dve.scalar_tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], data sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], operand1 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 21 : i64, op0 = "subtract", op1 = "multiply", reverse0 = true, reverse1 = true}
      isa_dve.transpose dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 32]], src sbuf(p32, 0x0, float32)[0 : [1, 32], [1, 32]] {id = 22 : i64}
      isa_dve.range_select dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], on_true psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], bound0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], bound1 sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 33 : i64, comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.000000e+04 : f32, range_start = 7 : i64, reduce_cmd = "reset_reduce", reduce_op = "maximum"}
      isa_dve.tensor_tensor_scan dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 34 : i64, op0 = "multiply", op1 = "add", initial = 1.000000e+00 : f32, reverse0 = true}
      isa_dve.tensor_copy_predicated dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], predicate sbuf(p0, 0x2000, uint8)[0 : [1, 128], [1, 512]] {id = 35 : i64, reverse_pred = true}
      isa_dve.bn_stats dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 6]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 36 : i64}
      isa_dve.bn_aggr dst sbuf(p0, 0x3100, float32)[0 : [1, 128], [1, 2]], src sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 6]] {id = 37 : i64}
      isa_dve.exponential dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], reduce_res sbuf(p0, 0x3008, float32)[0 : [1, 128], [1, 1]] {id = 38 : i64, max_value = 2.000000e+00 : f32, reduce_cmd = "reset_reduce"}
      isa_dve.select_reduce dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], predicate sbuf(p0, 0x2000, uint8)[0 : [1, 128], [1, 512]], on_true psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], on_false sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], reduce_res sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]] {id = 39 : i64, reduce_cmd = "reset_reduce", reduce_op = "maximum", reverse_pred = true}
      isa_dve.tensor_scalar_cumulative dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 40 : i64, op0 = "add", op1 = "maximum", imm0 = 1.000000e+00 : f32, reduce_cmd = "reset_reduce"}
      isa_dve.set_rng_seed src sbuf(p0, 0x3200, int32)[0 : [1, 1], [1, 1]] {id = 42 : i64}
      isa_dve.rng dst sbuf(p0, 0x3300, uint16)[0 : [1, 128], [1, 64]] {id = 43 : i64}
      isa_dve.rand2 dst psum(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]], max sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 44 : i64, min = -1.000000e+00 : f32}
      isa_dve.dropout dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 45 : i64, prob = 1.000000e-01 : f32}
      isa_dve.rand_set_state src sbuf(p0, 0x3400, uint32)[0 : [1, 128], [1, 24]] {id = 46 : i64}
      isa_dve.rand_get_state dst psum(p0, 0x0, uint32)[0 : [1, 128], [1, 24]] {id = 47 : i64}
      isa_dve.max8 dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 8]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 42 : i64}
      isa_dve.find_index8 dst sbuf(p0, 0x3100, uint16)[0 : [1, 128], [1, 8]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [4, 128], [1, 4]], vals sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 8]] {id = 43 : i64}
      isa_dve.match_replace8 dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], vals sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 8]], dst_idx sbuf(p0, 0x3200, uint32)[0 : [1, 128], [1, 8]] {id = 44 : i64, imm = -1.000000e+00 : f32}
      isa_dve.nc_stream_shuffle dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 32], [1, 512]] {id = 46 : i64, mask0 = 33619999 : i64, mask1 = 100992003 : i64, mask2 = 168364039 : i64, mask3 = 235736075 : i64, mask4 = 303108111 : i64, mask5 = 370480147 : i64, mask6 = 437852183 : i64, mask7 = 4280097819 : i64}
      isa_dve.quantize_mx dst sbuf(p0, 0x4000, float8_e5m2_x4)[0 : [1, 128], [1, 128]], src sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]], dst_scale sbuf(p0, 0x4200, float8_e8m0fnu)[0 : [1, 128], [1, 128]] {id = 43 : i64}
      isa_dve.sem_wait {id = 23 : i64, wait_sem = 3 : i64, wait_value = 1 : i64}
    }
    isa.stream "pool" {
      isa_pool.tensor_tensor dst sbuf(p0, 0x800, int32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 512]], in1 sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 512]] {id = 24 : i64, op = "bitwise_xor", signal_sem = 3 : i64}
      isa_pool.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]], operand1 sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]] {id = 25 : i64, op0 = "rsqrt", op1 = "bypass"}
      isa_pool.tensor_copy dst sbuf(p0, 0x800, float16)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 27 : i64}
      isa_pool.memset dst sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]] {id = 28 : i64, value = 1.000000e+00 : f32}
      isa_pool.iota dst sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 64]], pattern none(int32)[0 : [64, 128], [1, 64]] {id = 29 : i64, offset = -3 : i64}
      isa_pool.affine_select dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 128]], on_true sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 128]], pattern none(int32)[0 : [1, 128], [-1, 128]] {id = 30 : i64, cmp_op = "greater_equal", on_false_value = -3.000000e+04 : f32}
      isa_pool.tensor_partition_reduce dst sbuf(p0, 0x800, float32)[0 : [1, 1], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 41 : i64, op = "maximum"}
      isa_pool.rng dst sbuf(p0, 0x3300, int8)[0 : [1, 128], [1, 64]] {id = 48 : i64}
      isa_pool.rand_set_state src sbuf(p0, 0x3400, uint32)[0 : [1, 128], [1, 6]] {id = 49 : i64}
      isa_pool.rand_get_state dst sbuf(p0, 0x3400, uint32)[0 : [1, 128], [1, 6]] {id = 50 : i64}
      isa_pool.nonzero_with_count dst sbuf(p0, 0x4000, int32)[0 : [1, 128], [1, 513]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 45 : i64, index_offset = 512 : i64}
      isa_pool.topk dst sbuf(p0, 0x5000, bfloat16)[0 : [1, 128], [1, 64]], idx_dst sbuf(p0, 0x5100, uint32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x6000, bfloat16)[0 : [1, 128], [1, 256]] {id = 46 : i64, n = 4000 : i64}
      isa_pool.local_gather dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 128]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], index sbuf(p0, 0x3000, uint16)[0 : [1, 128], [1, 4]] {id = 43 : i64, num_elem_per_idx = 2 : i64, num_valid_indices = 64 : i64}
      isa_pool.nc_n_gather dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 16]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], indices sbuf(p0, 0x3000, uint32)[0 : [1, 128], [1, 16]] {id = 44 : i64}
      isa_pool.sequence_bounds dst sbuf(p0, 0x800, int32)[0 : [1, 1], [64, 2], [1, 64]], src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 64]] {id = 45 : i64}
      isa_pool.sem_wait {id = 32 : i64, wait_sem = 9 : i64, wait_value = 1 : i64}
    }
  }
}

// -----

// Boundary values: the last partition / SBUF byte, the last DMA queue, u32 ids and wait values, an empty stream.

// CHECK: builtin.module {
// CHECK-NEXT: isa.core @sg01 {
// CHECK-NEXT: isa.stream "pe" {
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "sp" {
// CHECK-NEXT: isa_sp.sem_wait {id = 0 : i64, wait_sem = 23 : i64, wait_value = 4294967295 : i64, signal_sem = 4 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst sbuf(p127, 0x2fffc, int8)[0 : [1, 1], [1, 4]], src sbuf(p0, 0x0, uint8)[0 : [1, 4], [1, 1]] {id = 4294967295 : i64, queue = 15 : i64, signal_sem = 23 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

builtin.module {
  isa.core @sg01 {
    isa.stream "pe" {
    }
    isa.stream "sp" {
      isa_sp.sem_wait {id = 0 : i64, wait_sem = 23 : i64, wait_value = 4294967295 : i64, signal_sem = 4 : i64}
      isa_sp.dma_copy dst sbuf(p127, 0x2fffc, int8)[0 : [1, 1], [1, 4]], src sbuf(p0, 0x0, uint8)[0 : [1, 4], [1, 1]] {id = 4294967295 : i64, queue = 15 : i64, signal_sem = 23 : i64}
    }
  }
}

// -----

// Registers, runtime loops and a counted loop (a rolled affine_range): every engine's stream holds the same control
// instructions (they run at a barrier).

// CHECK: builtin.module {
// CHECK-NEXT: isa.core @sg00 {
// CHECK-NEXT: isa.var @n : input [1, 1] int32 {var_id = 0 : i64}
// CHECK-NEXT: isa.stream "pe" {
// CHECK-NEXT: isa_pe.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_pe.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
// CHECK-NEXT: isa_pe.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_pe.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
// CHECK-NEXT: isa_pe.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
// CHECK-NEXT: isa_pe.loop_end {id = 5 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_pe.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
// CHECK-NEXT: isa_pe.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "act" {
// CHECK-NEXT: isa_act.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_act.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
// CHECK-NEXT: isa_act.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_act.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
// CHECK-NEXT: isa_act.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
// CHECK-NEXT: isa_act.loop_end {id = 5 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_act.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
// CHECK-NEXT: isa_act.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "dve" {
// CHECK-NEXT: isa_dve.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_dve.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
// CHECK-NEXT: isa_dve.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_dve.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
// CHECK-NEXT: isa_dve.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
// CHECK-NEXT: isa_dve.loop_end {id = 5 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_dve.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
// CHECK-NEXT: isa_dve.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "pool" {
// CHECK-NEXT: isa_pool.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_pool.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
// CHECK-NEXT: isa_pool.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_pool.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
// CHECK-NEXT: isa_pool.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
// CHECK-NEXT: isa_pool.loop_end {id = 5 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_pool.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
// CHECK-NEXT: isa_pool.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "sp" {
// CHECK-NEXT: isa_sp.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_sp.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
// CHECK-NEXT: isa_sp.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_sp.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
// CHECK-NEXT: isa_sp.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
// CHECK-NEXT: isa_sp.loop_end {id = 5 : i64, cond_reg = 2 : i64}
// CHECK-NEXT: isa_sp.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
// CHECK-NEXT: isa_sp.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

builtin.module {
  isa.core @sg00 {
    isa.var @n : input [1, 1] int32 {var_id = 0 : i64}
    isa.stream "pe" {
      isa_pe.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
      isa_pe.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
      isa_pe.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
      isa_pe.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
      isa_pe.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
      isa_pe.loop_end {id = 5 : i64, cond_reg = 2 : i64}
      isa_pe.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
      isa_pe.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
    }
    isa.stream "act" {
      isa_act.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
      isa_act.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
      isa_act.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
      isa_act.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
      isa_act.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
      isa_act.loop_end {id = 5 : i64, cond_reg = 2 : i64}
      isa_act.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
      isa_act.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
    }
    isa.stream "dve" {
      isa_dve.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
      isa_dve.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
      isa_dve.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
      isa_dve.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
      isa_dve.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
      isa_dve.loop_end {id = 5 : i64, cond_reg = 2 : i64}
      isa_dve.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
      isa_dve.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
    }
    isa.stream "pool" {
      isa_pool.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
      isa_pool.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
      isa_pool.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
      isa_pool.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
      isa_pool.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
      isa_pool.loop_end {id = 5 : i64, cond_reg = 2 : i64}
      isa_pool.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
      isa_pool.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
    }
    isa.stream "sp" {
      isa_sp.reg_load src sbuf(p0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 0 : i64, dst_reg = 1 : i64}
      isa_sp.reg_alu {id = 1 : i64, dst_reg = 2 : i64, op = "less", imm0 = -1 : i64, src1_reg = 1 : i64}
      isa_sp.loop_begin {id = 2 : i64, cond_reg = 2 : i64}
      isa_sp.reg_alu {id = 3 : i64, dst_reg = 3 : i64, op = "add", src0_reg = 3 : i64, imm1 = 1 : i64}
      isa_sp.reg_store dst hbm(var 0, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 4 : i64, src_reg = 3 : i64}
      isa_sp.loop_end {id = 5 : i64, cond_reg = 2 : i64}
      isa_sp.counted_loop_begin {id = 6 : i64, iv_reg = 4 : i64, bound = 2 : i64}
      isa_sp.counted_loop_end {id = 7 : i64, iv_reg = 4 : i64, step = 1 : i64, bound = 2 : i64}
    }
  }
}

// -----

// The LNC=2 pair: SENDRECV on any trigger engine (gpsimd_dma on pool only) and CORE_BARRIER, a control
// instruction in every stream of a core; core_mask 2 is core 1 alone.

// CHECK: builtin.module {
// CHECK-NEXT: isa.core @sg00 {
// CHECK-NEXT: isa.var @out : output [2, 128, 64] float32 {var_id = 0 : i64}
// CHECK-NEXT: isa.stream "pe" {
// CHECK-NEXT: isa_pe.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "act" {
// CHECK-NEXT: isa_act.sendrecv dst sbuf(p0, 0x200, bfloat16)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 64]] {id = 3 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 1 : i64, signal_sem = 1 : i64}
// CHECK-NEXT: isa_act.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "dve" {
// CHECK-NEXT: isa_dve.sendrecv dst sbuf(p0, 0x400, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x600, float32)[0 : [1, 128], [1, 64]] {id = 4 : i64, send_to_rank = 0 : i64, recv_from_rank = 0 : i64, signal_sem = 2 : i64}
// CHECK-NEXT: isa_dve.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "pool" {
// CHECK-NEXT: isa_pool.sendrecv dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 0 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64, gpsimd_dma = true, signal_sem = 3 : i64}
// CHECK-NEXT: isa_pool.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "sp" {
// CHECK-NEXT: isa_sp.sendrecv dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 1 : i64, send_to_rank = 1 : i64, recv_from_rank = 0 : i64, pipe_id = 2 : i64, wait_sem = 3 : i64, wait_value = 1 : i64, signal_sem = 4 : i64}
// CHECK-NEXT: isa_sp.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: isa.core @sg01 {
// CHECK-NEXT: isa.var @out : output [2, 128, 64] float32 {var_id = 0 : i64}
// CHECK-NEXT: isa.stream "pool" {
// CHECK-NEXT: isa_pool.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 0 : i64, core_mask = 2 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

builtin.module {
  isa.core @sg00 {
    isa.var @out : output [2, 128, 64] float32 {var_id = 0 : i64}
    isa.stream "pe" {
      isa_pe.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
    }
    isa.stream "act" {
      isa_act.sendrecv dst sbuf(p0, 0x200, bfloat16)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 64]] {id = 3 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 1 : i64, signal_sem = 1 : i64}
      isa_act.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
    }
    isa.stream "dve" {
      isa_dve.sendrecv dst sbuf(p0, 0x400, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x600, float32)[0 : [1, 128], [1, 64]] {id = 4 : i64, send_to_rank = 0 : i64, recv_from_rank = 0 : i64, signal_sem = 2 : i64}
      isa_dve.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
    }
    isa.stream "pool" {
      isa_pool.sendrecv dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 0 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64, gpsimd_dma = true, signal_sem = 3 : i64}
      isa_pool.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
    }
    isa.stream "sp" {
      isa_sp.sendrecv dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 1 : i64, send_to_rank = 1 : i64, recv_from_rank = 0 : i64, pipe_id = 2 : i64, wait_sem = 3 : i64, wait_value = 1 : i64, signal_sem = 4 : i64}
      isa_sp.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 2 : i64, core_mask = 3 : i64}
    }
  }
  isa.core @sg01 {
    isa.var @out : output [2, 128, 64] float32 {var_id = 0 : i64}
    isa.stream "pool" {
      isa_pool.core_barrier data hbm(var 0, 0x0, float32)[0 : [8192, 2], [64, 128], [1, 64]] {id = 0 : i64, core_mask = 2 : i64}
    }
  }
}

// -----

// DEBUG_PRINT (nl.device_print): a DMA of an SBUF or HBM tile to the host's debug stream on an SP queue, signalling
// that queue. The IR holds the prefix itself; the NEFF holds its index in the string table (strings.json).

// CHECK: builtin.module {
// CHECK-NEXT: isa.core @sg00 {
// CHECK-NEXT: isa.var @a : input [3, 4] bfloat16 {var_id = 0 : i64}
// CHECK-NEXT: isa.stream "sp" {
// CHECK-NEXT: isa_sp.debug_print src sbuf(p0, 0x40, bfloat16)[0 : [1, 3], [1, 4]] {id = 1 : i64, queue = 1 : i64, prefix = "value of a:", signal_sem = 9 : i64}
// CHECK-NEXT: isa_sp.debug_print src hbm(var 0, 0x0, bfloat16)[0 : [4, 3], [1, 4]] {id = 2 : i64, queue = 0 : i64, prefix = "a (hbm) \22raw\22", wait_sem = 9 : i64, wait_value = 1 : i64, signal_sem = 8 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

builtin.module {
  isa.core @sg00 {
    isa.var @a : input [3, 4] bfloat16 {var_id = 0 : i64}
    isa.stream "sp" {
      isa_sp.debug_print src sbuf(p0, 0x40, bfloat16)[0 : [1, 3], [1, 4]] {id = 1 : i64, queue = 1 : i64, prefix = "value of a:", signal_sem = 9 : i64}
      isa_sp.debug_print src hbm(var 0, 0x0, bfloat16)[0 : [4, 3], [1, 4]] {id = 2 : i64, queue = 0 : i64, prefix = "a (hbm) \"raw\"", wait_sem = 9 : i64, wait_value = 1 : i64, signal_sem = 8 : i64}
    }
  }
}

// -----

// The collectives between ranks (target/collectives.py): DMAs triggered by SP on a queue (its semaphore
// signals), on HBM or SBUF, the replica group a string; RANK_ID and RING_RANK_ID write a register (control
// instructions, in every stream).

// CHECK: builtin.module {
// CHECK-NEXT: isa.core @sg00 {
// CHECK-NEXT: isa.var @x : input [4, 64] float32 {var_id = 0 : i64}
// CHECK-NEXT: isa.var @y : output [16, 64] float32 {var_id = 1 : i64}
// CHECK-NEXT: isa.var @md : input [3, 4] uint32 {var_id = 2 : i64}
// CHECK-NEXT: isa.stream "pe" {
// CHECK-NEXT: isa_pe.rank_id {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_pe.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "act" {
// CHECK-NEXT: isa_act.rank_id {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_act.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "dve" {
// CHECK-NEXT: isa_dve.rank_id {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_dve.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "pool" {
// CHECK-NEXT: isa_pool.rank_id {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_pool.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
// CHECK-NEXT: }
// CHECK-NEXT: isa.stream "sp" {
// CHECK-NEXT: isa_sp.rank_id {id = 0 : i64, dst_reg = 1 : i64}
// CHECK-NEXT: isa_sp.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
// CHECK-NEXT: isa_sp.all_reduce dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 2 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, op = "add", signal_sem = 9 : i64}
// CHECK-NEXT: isa_sp.all_gather dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]] {id = 3 : i64, queue = 2 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}
// CHECK-NEXT: isa_sp.reduce_scatter dst hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]] {id = 4 : i64, queue = 3 : i64, replica_groups = "0,1;2,3", group_size = 2 : i64, op = "maximum"}
// CHECK-NEXT: isa_sp.all_to_all dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]] {id = 5 : i64, queue = 0 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}
// CHECK-NEXT: isa_sp.all_gather_v dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]], metadata hbm(var 2, 0x0, uint32)[0 : [4, 3], [1, 4]] {id = 6 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, recv_counts_known = true}
// CHECK-NEXT: isa_sp.all_to_all_v dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], metadata hbm(var 2, 0x0, uint32)[0 : [4, 3], [1, 4]] {id = 7 : i64, queue = 2 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}
// CHECK-NEXT: isa_sp.collective_permute dst hbm(var 1, 0x0, float32)[0 : [64, 4], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]] {id = 8 : i64, queue = 3 : i64, source_target_pairs = "0>1;1>0", group_size = 2 : i64}
// CHECK-NEXT: isa_sp.collective_permute_implicit dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 9 : i64, queue = 0 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, channel = 1 : i64}
// CHECK-NEXT: isa_sp.collective_permute_implicit_reduce dst sbuf(p0, 0x200, float32)[0 : [1, 128], [1, 64]], src0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]], src1 sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]] {id = 10 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, op = "add"}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

builtin.module {
  isa.core @sg00 {
    isa.var @x : input [4, 64] float32 {var_id = 0 : i64}
    isa.var @y : output [16, 64] float32 {var_id = 1 : i64}
    isa.var @md : input [3, 4] uint32 {var_id = 2 : i64}
    isa.stream "pe" {
      isa_pe.rank_id {id = 0 : i64, dst_reg = 1 : i64}
      isa_pe.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
    }
    isa.stream "act" {
      isa_act.rank_id {id = 0 : i64, dst_reg = 1 : i64}
      isa_act.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
    }
    isa.stream "dve" {
      isa_dve.rank_id {id = 0 : i64, dst_reg = 1 : i64}
      isa_dve.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
    }
    isa.stream "pool" {
      isa_pool.rank_id {id = 0 : i64, dst_reg = 1 : i64}
      isa_pool.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
    }
    isa.stream "sp" {
      isa_sp.rank_id {id = 0 : i64, dst_reg = 1 : i64}
      isa_sp.ring_rank_id {id = 1 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}
      isa_sp.all_reduce dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 2 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, op = "add", signal_sem = 9 : i64}
      isa_sp.all_gather dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]] {id = 3 : i64, queue = 2 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}
      isa_sp.reduce_scatter dst hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]] {id = 4 : i64, queue = 3 : i64, replica_groups = "0,1;2,3", group_size = 2 : i64, op = "maximum"}
      isa_sp.all_to_all dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]] {id = 5 : i64, queue = 0 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}
      isa_sp.all_gather_v dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]], metadata hbm(var 2, 0x0, uint32)[0 : [4, 3], [1, 4]] {id = 6 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, recv_counts_known = true}
      isa_sp.all_to_all_v dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], metadata hbm(var 2, 0x0, uint32)[0 : [4, 3], [1, 4]] {id = 7 : i64, queue = 2 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}
      isa_sp.collective_permute dst hbm(var 1, 0x0, float32)[0 : [64, 4], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]] {id = 8 : i64, queue = 3 : i64, source_target_pairs = "0>1;1>0", group_size = 2 : i64}
      isa_sp.collective_permute_implicit dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 9 : i64, queue = 0 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, channel = 1 : i64}
      isa_sp.collective_permute_implicit_reduce dst sbuf(p0, 0x200, float32)[0 : [1, 128], [1, 64]], src0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]], src1 sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]] {id = 10 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, op = "add"}
    }
  }
}
