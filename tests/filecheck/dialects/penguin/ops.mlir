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
// CHECK: penguin.tensor_tensor dst %x[0 : [512, 128], [1, 512]], data1 %x[0 : [512, 128], [1, 512]], data2 %x[0 : [512, 128], [1, 512]] {op = "add", engine = "vector"}
// CHECK: penguin.tensor_scalar dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", operand1 = 1.000000e+00 : f32}
// CHECK: penguin.tensor_reduce dst %m[0 : [1, 128], [1, 1]], data %x[0 : [512, 128], [1, 512]] {op = "maximum", axes = array<i64: 1>, negate = true}
// CHECK: penguin.activation dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], bias %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {func = "exp", reduce_op = "add", reduce_cmd = "reset_reduce"}
// CHECK: penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]]
// CHECK: penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]] {accumulate = true}
// CHECK: penguin.iota dst %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<0 : [1, 128]>, channel_multiplier = -1 : i64}
// CHECK: penguin.affine_select dst %w[0 : [128, 128], [1, 128]], on_true %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<5 : [-1, 128]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal", on_false_value = -3.40282347e+38 : f32}
// CHECK: penguin.memset dst %m[0 : [1, 128], [1, 1]] {value = 0.000000e+00 : f32}
// CHECK: penguin.reciprocal dst %s[0 : [1, 128], [1, 1]], data %s[0 : [1, 128], [1, 1]]
// CHECK: penguin.transpose dst %p[0 : [512, 128], [1, 128]], data %w[0 : [128, 128], [1, 128]]
// CHECK: penguin.tensor_copy dst %x[0 : [512, 128], [1, 512]], src %p[0 : [512, 128], [1, 512]]
// CHECK: penguin.scalar_tensor_tensor dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]], operand1 %x[0 : [512, 128], [1, 512]] {op0 = "multiply", op1 = "add"}
// CHECK: penguin.tensor_scalar_reduce dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {op0 = "multiply", operand0 = 5.000000e-01 : f32, reduce_op = "maximum"}
// CHECK: penguin.tensor_tensor_scan dst %x[0 : [512, 128], [1, 512]], data0 %x[0 : [512, 128], [1, 512]], data1 %p[0 : [512, 128], [1, 512]], initial %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reverse1 = true}
// CHECK: penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]] {reverse_pred = true}
// CHECK: penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]] {src = 5.000000e-01 : f32}
// CHECK: penguin.bn_stats dst %st[0 : [6, 128], [1, 6]], data %x[0 : [512, 128], [1, 512]]
// CHECK: penguin.bn_aggr dst %mv[0 : [2, 128], [1, 2]], data %st[0 : [6, 128], [1, 6]]
// CHECK: penguin.exponential dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], max_value %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {reduce_cmd = "reset_reduce"}
// CHECK: penguin.select_reduce dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {on_false = -1.000000e+00 : f32, reduce_cmd = "reset_reduce", reduce_op = "maximum"}
// CHECK: penguin.tensor_scalar_cumulative dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], imm0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reduce_cmd = "reset_reduce"}
// CHECK: penguin.tensor_partition_reduce dst %mv[0 : [2, 1], [1, 2]], data %mv[0 : [2, 128], [1, 2]] {op = "add"}
// CHECK: penguin.quantize_mx dst %q[0 : [128, 128], [1, 128]], src %xh[0 : [512, 128], [1, 512]], dst_scale %qs[0 : [128, 128], [1, 128]]
// CHECK: penguin.matmul_mx dst %p[0 : [512, 128], [1, 128]], stationary %q4[0 : [128, 128], [1, 128]], moving %q[0 : [128, 128], [1, 128]], stationary_scale %qs[0 : [128, 128], [1, 128]], moving_scale %qs[0 : [128, 128], [1, 128] as uint8] {accumulate = false}
// CHECK: penguin.dma_transpose dst %w[0 : [128, 128], [1, 128]], src %in[0 : [512, 128], [1, 128]]
// CHECK: penguin.range_select dst %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], bound0 %m[0 : [1, 128], [1, 1]], bound1 %s[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.40282347e+38 : f32, range_start = 3 : i64, reduce_op = "maximum", reduce_cmd = "reset_reduce"}
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
    %xh = penguin.alloc "xh" : !penguin.tensor<sbuf, 128x512xbf16>
    %q = penguin.alloc "q" : !penguin.tensor<sbuf, 128x128xvector<4xf8E4M3FN>>
    %q4 = penguin.alloc "q4" : !penguin.tensor<sbuf, 128x128xvector<4xf4E2M1FN>>
    %qs = penguin.alloc "qs" : !penguin.tensor<sbuf, 128x128xf8E8M0FNU>
    penguin.loop "affine" 0 to 2 step 1 {
      %x = penguin.alloc "x" {address = array<i64: 0, 1024>} : !penguin.tensor<sbuf, 128x512xf32>
      %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
      penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %in[0 + 65536*i0 : [512, 128], [1, 512]] {loc = "k.py:7"}
      penguin.tensor_tensor dst %x[0 : [512, 128], [1, 512]], data1 %x[0 : [512, 128], [1, 512]], data2 %x[0 : [512, 128], [1, 512]] {op = "add", engine = "vector"}
      penguin.tensor_scalar dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", operand1 = 1.0 : f32}
      penguin.tensor_reduce dst %m[0 : [1, 128], [1, 1]], data %x[0 : [512, 128], [1, 512]] {op = "maximum", axes = array<i64: 1>, negate = true}
      penguin.activation dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], bias %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {func = "exp", reduce_op = "add", reduce_cmd = "reset_reduce"}
      penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]]
      penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [512, 128], [1, 512]] {accumulate = true}
      penguin.iota dst %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<0 : [1, 128]>, channel_multiplier = -1 : i64}
      penguin.affine_select dst %w[0 : [128, 128], [1, 128]], on_true %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<5 : [-1, 128]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal", on_false_value = -3.4028235e38 : f32}
      penguin.memset dst %m[0 : [1, 128], [1, 1]] {value = 0.0 : f32}
      penguin.reciprocal dst %s[0 : [1, 128], [1, 1]], data %s[0 : [1, 128], [1, 1]]
      penguin.transpose dst %p[0 : [512, 128], [1, 128]], data %w[0 : [128, 128], [1, 128]]
      penguin.tensor_copy dst %x[0 : [512, 128], [1, 512]], src %p[0 : [512, 128], [1, 512]]
      penguin.scalar_tensor_tensor dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], operand0 %m[0 : [1, 128], [1, 1]], operand1 %x[0 : [512, 128], [1, 512]] {op0 = "multiply", op1 = "add"}
      penguin.tensor_scalar_reduce dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {op0 = "multiply", operand0 = 0.5 : f32, reduce_op = "maximum"}
      penguin.tensor_tensor_scan dst %x[0 : [512, 128], [1, 512]], data0 %x[0 : [512, 128], [1, 512]], data1 %p[0 : [512, 128], [1, 512]], initial %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reverse1 = true}
      penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]] {reverse_pred = true}
      penguin.tensor_copy_predicated dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]] {src = 5.000000e-01 : f32}
      penguin.bn_stats dst %st[0 : [6, 128], [1, 6]], data %x[0 : [512, 128], [1, 512]]
      penguin.bn_aggr dst %mv[0 : [2, 128], [1, 2]], data %st[0 : [6, 128], [1, 6]]
      penguin.exponential dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], max_value %m[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {reduce_cmd = "reset_reduce"}
      penguin.select_reduce dst %x[0 : [512, 128], [1, 512]], predicate %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], reduce_res %s[0 : [1, 128], [1, 1]] {on_false = -1.000000e+00 : f32, reduce_cmd = "reset_reduce", reduce_op = "maximum"}
      penguin.tensor_scalar_cumulative dst %x[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]], imm0 %m[0 : [1, 128], [1, 1]] {op0 = "multiply", op1 = "add", reduce_cmd = "reset_reduce"}
      penguin.tensor_partition_reduce dst %mv[0 : [2, 1], [1, 2]], data %mv[0 : [2, 128], [1, 2]] {op = "add"}
      penguin.quantize_mx dst %q[0 : [128, 128], [1, 128]], src %xh[0 : [512, 128], [1, 512]], dst_scale %qs[0 : [128, 128], [1, 128]]
      penguin.matmul_mx dst %p[0 : [512, 128], [1, 128]], stationary %q4[0 : [128, 128], [1, 128]], moving %q[0 : [128, 128], [1, 128]], stationary_scale %qs[0 : [128, 128], [1, 128]], moving_scale %qs[0 : [128, 128], [1, 128] as uint8] {accumulate = false}
      penguin.dma_transpose dst %w[0 : [128, 128], [1, 128]], src %in[0 : [512, 128], [1, 128]]
      penguin.range_select dst %x[0 : [512, 128], [1, 512]], on_true %p[0 : [512, 128], [1, 512]], bound0 %m[0 : [1, 128], [1, 1]], bound1 %s[0 : [1, 128], [1, 1]], reduce_res %s[0 : [1, 128], [1, 1]] {comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.4028235e38 : f32, range_start = 3 : i64, reduce_op = "maximum", reduce_cmd = "reset_reduce"}
    }
    penguin.return %out : !penguin.tensor<shared_hbm, 256x512xf32>
  }
}
