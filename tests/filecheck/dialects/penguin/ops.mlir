// RUN: NKIC_ROUNDTRIP

// CHECK: penguin.graph @main {
// CHECK-NEXT: ^bb0(%a: !penguin.tensor<shared_hbm, 256x512xf32>):
// CHECK-NEXT: %{{.*}} = penguin.kernel_node @k(%a) {kind = "external", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 256x512xf32>) -> !penguin.tensor<shared_hbm, 256x512xf32>
// CHECK: penguin.kernel @k : (!penguin.tensor<shared_hbm, 256x512xf32>) -> !penguin.tensor<shared_hbm, 256x512xf32> program {
// CHECK: %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 256x512xf32>
// CHECK: %q = penguin.alloc "q" : !penguin.tensor<sbuf, 128x128xvector<4xf8E4M3FN>>
// CHECK: %q4 = penguin.alloc "q4" : !penguin.tensor<sbuf, 128x128xvector<4xf4E2M1FN>>
// CHECK: %qs = penguin.alloc "qs" : !penguin.tensor<sbuf, 128x128xf8E8M0FNU>
// CHECK: penguin.loop "affine" 0 to 2 step 1 {
// CHECK: %x = penguin.alloc "x" {address = array<i64: 0, 1024>} : !penguin.tensor<sbuf, 128x512xf32>
// CHECK: %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
// CHECK: penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %{{.*}}[0 + 65536*i0 : [512, 128], [1, 512]] {loc = "k.py:7"}
// CHECK: penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %{{.*}}[0 : [512, 128], [1, 512] + 512*vector src_offset], src_offset %ni[0 : [16, 128], [1, 1]] {oob_skip = true}
// CHECK: penguin.dma_copy dst %{{.*}}[0 : [512, 128], [1, 512] + 512*dst_offset], src %x[0 : [512, 128], [1, 512]], dst_offset %seg[0 : [64, 1], [1, 1]]
// CHECK: penguin.dma_copy dst %x[0 : [512, 1], [1, 512]], src %{{.*}}[0 : [512, 1], [1, 512] + 1*r3 as float32]
// CHECK: penguin.tensor_tensor dst %x[0 : [512, 128], [1, 512]], data1 %x[0 : [512, 128], [1, 512]], data2 %x[0 : [512, 128], [1, 512]] {op = "add", engine = "vector"}
// CHECK: penguin.tensor_scalar dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", operand1 = 1.000000e+00 : f32}
// CHECK: penguin.tensor_reduce dst %m[0 : [1, 128], [1, 1]], data %x[0 : [512, 128], [1, 512]] {op = "maximum", axes = array<i64: 1>, negate = true}
// CHECK: penguin.activation dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], bias %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {func = "exp", reduce_op = "add", reduce_cmd = "reset_reduce"}
// CHECK: penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]]
// CHECK: penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]] {accumulate = true}
// CHECK: penguin.matmul dst %p[16384 : [512, 32], [1, 512]], stationary %w[0 : [128, 128], [1, 32]], moving %x[0 : [512, 128], [1, 512]] {is_transpose = true, is_moving_onezero = true, tile_row = 0 : i64, tile_col = 32 : i64, tile_rows = 128 : i64, tile_cols = 32 : i64}
// CHECK: penguin.matmul dst %p[0 : [512, 64], [1, 256]], stationary %x[0 : [512, 64], [256, 2], [1, 64]], moving %x[0 : [512, 64], [256, 2], [1, 256]] {double_row = true, tile_row = 64 : i64, tile_rows = 64 : i64, tile_cols = 128 : i64}
// CHECK: penguin.iota dst %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<0 : [1, 128]>, channel_multiplier = -1 : i64}
// CHECK: penguin.affine_select dst %w[0 : [128, 128], [1, 128]], on_true %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<5 : [-1, 128]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal", on_false_value = -3.40282347e+38 : f32}
// CHECK: penguin.memset dst %m[0 : [1, 128], [1, 1]] {value = 0.000000e+00 : f32}
// CHECK: penguin.reciprocal dst %s[0 : [1, 128], [1, 1]], data %s[0 : [1, 128], [1, 1]]
// CHECK: penguin.transpose dst %p[0 : [512, 128], [1, 128]], data %w[0 : [128, 128], [1, 128]]
// CHECK: penguin.tensor_copy dst %x[0 : [512, 128], [1, 512]], src %p[0 : [512, 128], [1, 512]]
// CHECK: penguin.tensor_copy dst %x[0 : [512, 128], [1, 64]], src %p[0 : [512, 128], [1, 64] + 1*indirect src_offset], src_offset %x[0 : [512, 128], [1, 1] as int32] {engine = "vector"}
// CHECK: penguin.scalar_tensor_tensor dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]], operand1 %x[0 : [512, 128], [1, 512]] {op0 = "multiply", op1 = "add"}
// CHECK: penguin.tensor_scalar_reduce dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {op0 = "multiply", operand0 = 5.000000e-01 : f32, reduce_op = "maximum"}
// CHECK: penguin.tensor_tensor_scan dst %x[0 : [512, 128], [1, 512]], data0 %x[0 : [512, 128], [1, 512]], data1 %p[0 : [512, 128], [1, 512]], initial %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reverse1 = true}
// CHECK: penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512] as uint32] {reverse_pred = true}
// CHECK: penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512] as uint32] {src = 5.000000e-01 : f32}
// CHECK: penguin.bn_stats dst %st[0 : [6, 128], [1, 6]], data %x[0 : [512, 128], [1, 512]]
// CHECK: penguin.bn_aggr dst %mv[0 : [2, 128], [1, 2]], data %st[0 : [6, 128], [1, 6]]
// CHECK: penguin.exponential dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], max_value %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {reduce_cmd = "reset_reduce"}
// CHECK: penguin.select_reduce dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {on_false = -1.000000e+00 : f32, reduce_cmd = "reset_reduce", reduce_op = "maximum"}
// CHECK: penguin.tensor_scalar_cumulative dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], imm0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reduce_cmd = "reset_reduce"}
// CHECK: penguin.tensor_partition_reduce dst %mv[0 : [2, 1], [1, 2]], data %mv[0 : [2, 128], [1, 2]] {op = "add"}
// CHECK: penguin.register_load src %m[0 : [1, 1], [1, 1]] {dst_reg = 1 : i64}
// CHECK: penguin.register_alu {dst_reg = 2 : i64, op = "less", imm0 = 3 : i64, src1_reg = 1 : i64}
// CHECK: penguin.loop_begin {cond_reg = 2 : i64}
// CHECK: penguin.register_store dst %out[0 : [1, 1], [1, 1]] {src_reg = 1 : i64}
// CHECK: penguin.loop_end {cond_reg = 2 : i64}
// CHECK: penguin.counted_loop_begin {iv_reg = 3 : i64, bound = 4 : i64}
// CHECK: penguin.counted_loop_end {iv_reg = 3 : i64, step = 1 : i64, bound = 4 : i64}
// CHECK: penguin.set_rng_seed src_seeds %seed[0 : [1, 1], [1, 1]]
// CHECK: penguin.rng dst %r[0 : [24, 128], [1, 24]] {engine = "vector"}
// CHECK: penguin.rng dst %r[0 : [24, 128], [1, 6]] {engine = "gpsimd"}
// CHECK: penguin.rand_get_state dst %r[0 : [24, 128], [1, 24]] {engine = "vector"}
// CHECK: penguin.rand_set_state src_seeds %r[0 : [24, 128], [1, 6]] {engine = "gpsimd"}
// CHECK: penguin.rand2 dst %x[0 : [512, 128], [1, 512]], min %m[0 : [1, 128], [1, 1]] {max = 2.000000e+00 : f32}
// CHECK: penguin.dropout dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]] {prob = 2.500000e-01 : f32}
// CHECK: penguin.dropout dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], prob %m[0 : [1, 128], [1, 1]]
// CHECK: penguin.max8 dst %e8[0 : [8, 128], [1, 8]], src %x[0 : [512, 128], [1, 512]]
// CHECK: penguin.find_index8 dst %i8[0 : [8, 128], [1, 8]], data %x[0 : [512, 128], [1, 512]], vals %e8[0 : [8, 128], [1, 8]]
// CHECK: penguin.match_replace8 dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], vals %e8[0 : [8, 128], [1, 8]], dst_idx %i8[0 : [8, 128], [1, 8]] {imm = -3.40282347e+38 : f32}
// CHECK: penguin.nonzero_with_count dst %nz[0 : [513, 128], [1, 513]], src %x[0 : [512, 128], [1, 512]] {index_offset = 16 : i64, padding_val = -1 : i64}
// CHECK: penguin.topk val_dst %tv[0 : [40, 128], [1, 8]], idx_dst %ti[0 : [40, 128], [1, 8]], src %tv[0 : [40, 128], [1, 40]] {n = 630 : i64}
// CHECK: penguin.local_gather dst %x[0 : [512, 128], [1, 128]], src_buffer %x[0 : [512, 128], [1, 512]], index %gi[0 : [4, 128], [1, 4]] {num_elem_per_idx = 2 : i64, num_valid_indices = 64 : i64}
// CHECK: penguin.nc_n_gather dst %x[0 : [512, 128], [1, 16]], data %x[0 : [512, 128], [1, 512]], indices %ni[0 : [16, 128], [1, 16]]
// CHECK: penguin.nc_stream_shuffle dst %x[0 : [512, 32], [1, 512]], src %x[0 : [512, 32], [1, 512]] {shuffle_mask = array<i64: 31, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 255>}
// CHECK: penguin.sequence_bounds dst %bnd[0 : [128, 1], [64, 2], [1, 64]], segment_ids %seg[0 : [64, 1], [1, 64]] {tag = "i7"}
// CHECK: penguin.dma_compute dst %x[0 : [512, 128], [1, 512]], src0 %in[0 : [512, 128], [1, 512]], src1 %x[0 : [512, 128], [1, 512]] {reduce_op = "add", after = ["i7"]}
// CHECK: penguin.sendrecv dst %x[0 : [512, 128], [1, 128]], src %x[128 : [512, 128], [1, 128]] {send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 0 : i64, gpsimd_dma = true, engine = "gpsimd"}
// CHECK: penguin.core_barrier data %out[0 : [512, 256], [1, 512]] {cores = array<i64: 0, 1>, engine = "gpsimd"}
// CHECK: penguin.quantize_mx dst %q[0 : [128, 128], [1, 128]], src %xh[0 : [512, 128], [1, 512]], dst_scale %qs[0 : [128, 128], [1, 128]]
// CHECK: penguin.matmul_mx dst %p[0 : [512, 128], [1, 128]], stationary %q4[0 : [128, 128], [1, 128]], moving %q[0 : [128, 128], [1, 128]], stationary_scale %qs[0 : [128, 128], [1, 128]], moving_scale %qs[0 : [128, 128], [1, 128] as uint8] {accumulate = false}
// CHECK: penguin.dma_transpose dst %w[0 : [128, 128], [1, 128]], src %in[0 : [512, 128], [1, 128]]
// CHECK: penguin.range_select dst %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], bound0 %m[0 : [1, 128], [1, 1]], bound1 %s[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.40282347e+38 : f32, range_start = 3 : i64, reduce_op = "maximum", reduce_cmd = "reset_reduce"}
// CHECK: penguin.activate2 dst %x[0 : [512, 128], [1, 512]], data %p[0 : [512, 128], [1, 512]], imm0 %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {func = "gelu_dx", op0 = "multiply", op1 = "add", imm1 = 5.000000e-01 : f32, relu_param = 1.000000e-01 : f32, reverse0 = true, reduce_op = "maximum", reduce_cmd = "reset_reduce"}
// CHECK: penguin.device_print src %x[0 : [512, 128], [1, 512]] {prefix = "value of x:"}
// CHECK: penguin.device_print src %in[0 : [512, 4], [1, 8]] {prefix = "in \22hbm\22 rows"}
// CHECK: penguin.all_reduce dst %x[0 : [512, 128], [1, 128]], src %x[128 : [512, 128], [1, 128]] {replica_groups = "0,1,2,3", op = "add"}
// CHECK: penguin.all_gather dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 64], [1, 512]] {replica_groups = "0,1,2,3", collective_dim = 0 : i64}
// CHECK: penguin.reduce_scatter dst %out[0 : [512, 64], [1, 512]], src %in[0 : [512, 256], [1, 512]] {replica_groups = "0,1;2,3", op = "maximum", collective_dim = 0 : i64}
// CHECK: penguin.all_to_all dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]] {replica_groups = "0,1,2,3", collective_dim = 0 : i64}
// CHECK: penguin.all_gather_v dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]], metadata %md[0 : [4, 3], [1, 4]] {replica_groups = "0,1,2,3", recv_counts_known = true}
// CHECK: penguin.all_to_all_v dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]], metadata %md[0 : [4, 3], [1, 4]] {replica_groups = "0,1,2,3"}
// CHECK: penguin.collective_permute dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]] {source_target_pairs = "0>1;1>0"}
// CHECK: penguin.collective_permute_implicit dst %x[0 : [512, 128], [1, 128]], src %x[128 : [512, 128], [1, 128]] {replica_groups = "0,1,2,3", channel = 1 : i64}
// CHECK: penguin.collective_permute_implicit_reduce dst %x[0 : [512, 128], [1, 128]], src0 %x[128 : [512, 128], [1, 128]], src1 %x[256 : [512, 128], [1, 128]] {replica_groups = "0,1,2,3", op = "add"}
// CHECK: penguin.rank_id {dst_reg = 3 : i64}
// CHECK: penguin.collective_permute_implicit_current_processing_rank_id {dst_reg = 4 : i64, iteration = 2 : i64, replica_groups = "0,1,2,3"}
// CHECK: penguin.return %out : !penguin.tensor<shared_hbm, 256x512xf32>

builtin.module {
  penguin.graph @main {
  ^bb0(%a: !penguin.tensor<shared_hbm, 256x512xf32>):
    %o = penguin.kernel_node @k(%a) {kind = "external", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 256x512xf32>) -> !penguin.tensor<shared_hbm, 256x512xf32>
    penguin.graph_return %o : !penguin.tensor<shared_hbm, 256x512xf32>
  }
  penguin.kernel @k : (!penguin.tensor<shared_hbm, 256x512xf32>) -> !penguin.tensor<shared_hbm, 256x512xf32> program {
  ^bb0(%in: !penguin.tensor<shared_hbm, 256x512xf32>):
    %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 256x512xf32>
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xf32>
    %m = penguin.alloc "m" : !penguin.tensor<sbuf, 128x1xf32>
    %s = penguin.alloc "s" : !penguin.tensor<sbuf, 128x1xf32>
    %st = penguin.alloc "st" : !penguin.tensor<sbuf, 128x6xf32>
    %mv = penguin.alloc "mv" : !penguin.tensor<sbuf, 128x2xf32>
    %seed = penguin.alloc "seed" : !penguin.tensor<sbuf, 1x1xi32>
    %r = penguin.alloc "r" : !penguin.tensor<sbuf, 128x24xui32>
    %e8 = penguin.alloc "e8" : !penguin.tensor<sbuf, 128x8xf32>
    %i8 = penguin.alloc "i8" : !penguin.tensor<sbuf, 128x8xui32>
    %md = penguin.alloc "md" : !penguin.tensor<shared_hbm, 3x4xui32>
    %nz = penguin.alloc "nz" : !penguin.tensor<sbuf, 128x513xi32>
    %tv = penguin.alloc "tv" : !penguin.tensor<sbuf, 128x40xbf16>
    %ti = penguin.alloc "ti" : !penguin.tensor<sbuf, 128x40xui32>
    %gi = penguin.alloc "gi" : !penguin.tensor<sbuf, 128x4xui16>
    %ni = penguin.alloc "ni" : !penguin.tensor<sbuf, 128x16xui32>
    %seg = penguin.alloc "seg" : !penguin.tensor<sbuf, 1x64xi32>
    %bnd = penguin.alloc "bnd" : !penguin.tensor<sbuf, 1x2x64xi32>
    %xh = penguin.alloc "xh" : !penguin.tensor<sbuf, 128x512xbf16>
    %q = penguin.alloc "q" : !penguin.tensor<sbuf, 128x128xvector<4xf8E4M3FN>>
    %q4 = penguin.alloc "q4" : !penguin.tensor<sbuf, 128x128xvector<4xf4E2M1FN>>
    %qs = penguin.alloc "qs" : !penguin.tensor<sbuf, 128x128xf8E8M0FNU>
    penguin.loop "affine" 0 to 2 step 1 {
      %x = penguin.alloc "x" {address = array<i64: 0, 1024>} : !penguin.tensor<sbuf, 128x512xf32>
      %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
      penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %in[0 + 65536*i0 : [512, 128], [1, 512]] {loc = "k.py:7"}
      penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %in[0 : [512, 128], [1, 512] + 512*vector src_offset], src_offset %ni[0 : [16, 128], [1, 1]] {oob_skip = true}
      penguin.dma_copy dst %in[0 : [512, 128], [1, 512] + 512*dst_offset], src %x[0 : [512, 128], [1, 512]], dst_offset %seg[0 : [64, 1], [1, 1]]
      penguin.dma_copy dst %x[0 : [512, 1], [1, 512]], src %in[0 : [512, 1], [1, 512] + 1*r3 as float32]
      penguin.tensor_tensor dst %x[0 : [512, 128], [1, 512]], data1 %x[0 : [512, 128], [1, 512]], data2 %x[0 : [512, 128], [1, 512]] {op = "add", engine = "vector"}
      penguin.tensor_scalar dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", operand1 = 1.0 : f32}
      penguin.tensor_reduce dst %m[0 : [1, 128], [1, 1]], data %x[0 : [512, 128], [1, 512]] {op = "maximum", axes = array<i64: 1>, negate = true}
      penguin.activation dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], bias %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {func = "exp", reduce_op = "add", reduce_cmd = "reset_reduce"}
      penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]]
      penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]] {accumulate = true}
      penguin.matmul dst %p[16384 : [512, 32], [1, 512]], stationary %w[0 : [128, 128], [1, 32]], moving %x[0 : [512, 128], [1, 512]] {is_transpose = true, is_moving_onezero = true, tile_row = 0 : i64, tile_col = 32 : i64, tile_rows = 128 : i64, tile_cols = 32 : i64}
      penguin.matmul dst %p[0 : [512, 64], [1, 256]], stationary %x[0 : [512, 64], [256, 2], [1, 64]], moving %x[0 : [512, 64], [256, 2], [1, 256]] {double_row = true, tile_row = 64 : i64, tile_rows = 64 : i64, tile_cols = 128 : i64}
      penguin.iota dst %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<0 : [1, 128]>, channel_multiplier = -1 : i64}
      penguin.affine_select dst %w[0 : [128, 128], [1, 128]], on_true %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<5 : [-1, 128]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal", on_false_value = -3.4028235e38 : f32}
      penguin.memset dst %m[0 : [1, 128], [1, 1]] {value = 0.0 : f32}
      penguin.reciprocal dst %s[0 : [1, 128], [1, 1]], data %s[0 : [1, 128], [1, 1]]
      penguin.transpose dst %p[0 : [512, 128], [1, 128]], data %w[0 : [128, 128], [1, 128]]
      penguin.tensor_copy dst %x[0 : [512, 128], [1, 512]], src %p[0 : [512, 128], [1, 512]]
      penguin.tensor_copy dst %x[0 : [512, 128], [1, 64]], src %p[0 : [512, 128], [1, 64] + 1*indirect src_offset], src_offset %x[0 : [512, 128], [1, 1] as int32] {engine = "vector"}
      penguin.scalar_tensor_tensor dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]], operand1 %x[0 : [512, 128], [1, 512]] {op0 = "multiply", op1 = "add"}
      penguin.tensor_scalar_reduce dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {op0 = "multiply", operand0 = 0.5 : f32, reduce_op = "maximum"}
      penguin.tensor_tensor_scan dst %x[0 : [512, 128], [1, 512]], data0 %x[0 : [512, 128], [1, 512]], data1 %p[0 : [512, 128], [1, 512]], initial %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reverse1 = true}
      penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512] as uint32] {reverse_pred = true}
      penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512] as uint32] {src = 5.000000e-01 : f32}
      penguin.bn_stats dst %st[0 : [6, 128], [1, 6]], data %x[0 : [512, 128], [1, 512]]
      penguin.bn_aggr dst %mv[0 : [2, 128], [1, 2]], data %st[0 : [6, 128], [1, 6]]
      penguin.exponential dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], max_value %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {reduce_cmd = "reset_reduce"}
      penguin.select_reduce dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {on_false = -1.000000e+00 : f32, reduce_cmd = "reset_reduce", reduce_op = "maximum"}
      penguin.tensor_scalar_cumulative dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], imm0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reduce_cmd = "reset_reduce"}
      penguin.tensor_partition_reduce dst %mv[0 : [2, 1], [1, 2]], data %mv[0 : [2, 128], [1, 2]] {op = "add"}
      penguin.register_load src %m[0 : [1, 1], [1, 1]] {dst_reg = 1 : i64}
      penguin.register_alu {dst_reg = 2 : i64, op = "less", imm0 = 3 : i64, src1_reg = 1 : i64}
      penguin.loop_begin {cond_reg = 2 : i64}
      penguin.register_store dst %out[0 : [1, 1], [1, 1]] {src_reg = 1 : i64}
      penguin.loop_end {cond_reg = 2 : i64}
      penguin.counted_loop_begin {iv_reg = 3 : i64, bound = 4 : i64}
      penguin.counted_loop_end {iv_reg = 3 : i64, step = 1 : i64, bound = 4 : i64}
      penguin.set_rng_seed src_seeds %seed[0 : [1, 1], [1, 1]]
      penguin.rng dst %r[0 : [24, 128], [1, 24]] {engine = "vector"}
      penguin.rng dst %r[0 : [24, 128], [1, 6]] {engine = "gpsimd"}
      penguin.rand_get_state dst %r[0 : [24, 128], [1, 24]] {engine = "vector"}
      penguin.rand_set_state src_seeds %r[0 : [24, 128], [1, 6]] {engine = "gpsimd"}
      penguin.rand2 dst %x[0 : [512, 128], [1, 512]], min %m[0 : [1, 128], [1, 1]] {max = 2.000000e+00 : f32}
      penguin.dropout dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]] {prob = 2.500000e-01 : f32}
      penguin.dropout dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], prob %m[0 : [1, 128], [1, 1]]
      penguin.max8 dst %e8[0 : [8, 128], [1, 8]], src %x[0 : [512, 128], [1, 512]]
      penguin.find_index8 dst %i8[0 : [8, 128], [1, 8]], data %x[0 : [512, 128], [1, 512]], vals %e8[0 : [8, 128], [1, 8]]
      penguin.match_replace8 dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], vals %e8[0 : [8, 128], [1, 8]], dst_idx %i8[0 : [8, 128], [1, 8]] {imm = -3.4028235e38 : f32}
      penguin.nonzero_with_count dst %nz[0 : [513, 128], [1, 513]], src %x[0 : [512, 128], [1, 512]] {index_offset = 16 : i64, padding_val = -1 : i64}
      penguin.topk val_dst %tv[0 : [40, 128], [1, 8]], idx_dst %ti[0 : [40, 128], [1, 8]], src %tv[0 : [40, 128], [1, 40]] {n = 630 : i64}
      penguin.local_gather dst %x[0 : [512, 128], [1, 128]], src_buffer %x[0 : [512, 128], [1, 512]], index %gi[0 : [4, 128], [1, 4]] {num_elem_per_idx = 2 : i64, num_valid_indices = 64 : i64}
      penguin.nc_n_gather dst %x[0 : [512, 128], [1, 16]], data %x[0 : [512, 128], [1, 512]], indices %ni[0 : [16, 128], [1, 16]]
      penguin.nc_stream_shuffle dst %x[0 : [512, 32], [1, 512]], src %x[0 : [512, 32], [1, 512]] {shuffle_mask = array<i64: 31, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 255>}
      penguin.sequence_bounds dst %bnd[0 : [128, 1], [64, 2], [1, 64]], segment_ids %seg[0 : [64, 1], [1, 64]] {tag = "i7"}
      penguin.dma_compute dst %x[0 : [512, 128], [1, 512]], src0 %in[0 : [512, 128], [1, 512]], src1 %x[0 : [512, 128], [1, 512]] {reduce_op = "add", after = ["i7"]}
      penguin.sendrecv dst %x[0 : [512, 128], [1, 128]], src %x[128 : [512, 128], [1, 128]] {send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 0 : i64, gpsimd_dma = true, engine = "gpsimd"}
      penguin.core_barrier data %out[0 : [512, 256], [1, 512]] {cores = array<i64: 0, 1>, engine = "gpsimd"}
      penguin.quantize_mx dst %q[0 : [128, 128], [1, 128]], src %xh[0 : [512, 128], [1, 512]], dst_scale %qs[0 : [128, 128], [1, 128]]
      penguin.matmul_mx dst %p[0 : [512, 128], [1, 128]], stationary %q4[0 : [128, 128], [1, 128]], moving %q[0 : [128, 128], [1, 128]], stationary_scale %qs[0 : [128, 128], [1, 128]], moving_scale %qs[0 : [128, 128], [1, 128] as uint8] {accumulate = false}
      penguin.dma_transpose dst %w[0 : [128, 128], [1, 128]], src %in[0 : [512, 128], [1, 128]]
      penguin.range_select dst %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], bound0 %m[0 : [1, 128], [1, 1]], bound1 %s[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.4028235e38 : f32, range_start = 3 : i64, reduce_op = "maximum", reduce_cmd = "reset_reduce"}
      penguin.activate2 dst %x[0 : [512, 128], [1, 512]], data %p[0 : [512, 128], [1, 512]], imm0 %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {func = "gelu_dx", op0 = "multiply", op1 = "add", imm1 = 5.000000e-01 : f32, relu_param = 1.000000e-01 : f32, reverse0 = true, reduce_op = "maximum", reduce_cmd = "reset_reduce"}
      penguin.device_print src %x[0 : [512, 128], [1, 512]] {prefix = "value of x:"}
      penguin.device_print src %in[0 : [512, 4], [1, 8]] {prefix = "in \"hbm\" rows"}
      penguin.all_reduce dst %x[0 : [512, 128], [1, 128]], src %x[128 : [512, 128], [1, 128]] {replica_groups = "0,1,2,3", op = "add"}
      penguin.all_gather dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 64], [1, 512]] {replica_groups = "0,1,2,3", collective_dim = 0 : i64}
      penguin.reduce_scatter dst %out[0 : [512, 64], [1, 512]], src %in[0 : [512, 256], [1, 512]] {replica_groups = "0,1;2,3", op = "maximum", collective_dim = 0 : i64}
      penguin.all_to_all dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]] {replica_groups = "0,1,2,3", collective_dim = 0 : i64}
      penguin.all_gather_v dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]], metadata %md[0 : [4, 3], [1, 4]] {replica_groups = "0,1,2,3", recv_counts_known = true}
      penguin.all_to_all_v dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]], metadata %md[0 : [4, 3], [1, 4]] {replica_groups = "0,1,2,3"}
      penguin.collective_permute dst %out[0 : [512, 256], [1, 512]], src %in[0 : [512, 256], [1, 512]] {source_target_pairs = "0>1;1>0"}
      penguin.collective_permute_implicit dst %x[0 : [512, 128], [1, 128]], src %x[128 : [512, 128], [1, 128]] {replica_groups = "0,1,2,3", channel = 1 : i64}
      penguin.collective_permute_implicit_reduce dst %x[0 : [512, 128], [1, 128]], src0 %x[128 : [512, 128], [1, 128]], src1 %x[256 : [512, 128], [1, 128]] {replica_groups = "0,1,2,3", op = "add"}
      penguin.rank_id {dst_reg = 3 : i64}
      penguin.collective_permute_implicit_current_processing_rank_id {dst_reg = 4 : i64, iteration = 2 : i64, replica_groups = "0,1,2,3"}
    }
    penguin.return %out : !penguin.tensor<shared_hbm, 256x512xf32>
  }
}
