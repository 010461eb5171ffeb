// RUN: nkic-opt %s -p stablehlo-to-penguin --split-input-file | filecheck %s

// The data-movement ops of common JAX programs (jnp.concatenate, jnp.pad, table[ids], lax.dynamic_slice), op by op.

// concatenate: one DMA per operand into its block of the result (the result's row stride, an offset on the axis).
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.dma_copy dst %out0_1[0 : [11, 4], [1, 8]], src %arg0_1[0 : [8, 4], [1, 8]]
// CHECK-NEXT:  penguin.dma_copy dst %out0_1[8 : [11, 4], [1, 3]], src %arg1_1[0 : [3, 4], [1, 3]]
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x3xf32>) -> tensor<4x11xf32> {
  %o = "stablehlo.concatenate"(%a, %b) <{dimension = 1 : i64}> : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x11xf32>
  func.return %o : tensor<4x11xf32>
}

// -----

// pad: the result filled with the padding value (memset + store), then the operand DMA'd in at the low edge
// (offset 1*17 + 2) with the interior padding as a doubled column step.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.memset dst %sbuf[0 : [17, 7], [1, 17]] {{.*}} value = 1.500000e+00 : f32
// CHECK-NEXT:  penguin.dma_copy dst %out0_1[0 : [17, 7], [1, 17]], src %sbuf
// CHECK-NEXT:  penguin.dma_copy dst %out0_1[19 : [17, 4], [2, 8]], src %arg0_1[0 : [8, 4], [1, 8]]
func.func @main(%a: tensor<4x8xf32>) -> tensor<7x17xf32> {
  %v = stablehlo.constant dense<1.500000e+00> : tensor<f32>
  %o = "stablehlo.pad"(%a, %v) <{edge_padding_high = array<i64: 2, 0>, edge_padding_low = array<i64: 1, 2>, interior_padding = array<i64: 0, 1>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<7x17xf32>
  func.return %o : tensor<7x17xf32>
}

// -----

// gather (the row gather table[ids]): per 128 indices, the index tile loaded, clamped to [0, 299], and one indirect
// DMA of whole rows (24 elements per index).
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.dma_copy dst %sbuf[0 : [1, 128], [1, 1]], src %arg1_1[0 : [1, 128], [1, 1]]
// CHECK:       penguin.tensor_scalar {{.*}} op0 = "maximum", operand0 = 0.000000e+00 : f32
// CHECK:       penguin.tensor_scalar dst %[[I:sbuf_2]]{{.*}} op0 = "minimum", operand0 = 2.990000e+02 : f32
// CHECK-NEXT:  penguin.dma_copy dst %out0_1[0 : [24, 128], [1, 24]], src %arg0_1[0 : [24, 128], [1, 24] + 24*vector src_offset], src_offset %[[I]]
// CHECK:       penguin.dma_copy dst %out0_1[3072 : [24, 72], [1, 24]], src %arg0_1[0 : [24, 72], [1, 24] + 24*vector src_offset]
func.func @main(%t: tensor<300x24xf32>, %i: tensor<200x1xi32>) -> tensor<200x24xf32> {
  %o = "stablehlo.gather"(%t, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 24>}> : (tensor<300x24xf32>, tensor<200x1xi32>) -> tensor<200x24xf32>
  func.return %o : tensor<200x24xf32>
}

// -----

// dynamic_slice: the constant start folded into the offset (row 1), the run-time one loaded, clamped to
// [0, 8 - 4] and added as a register offset along its dimension.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.tensor_scalar dst %[[S:sbuf_2]]{{.*}} op0 = "minimum", operand0 = 4.000000e+00 : f32
// CHECK-NEXT:  penguin.dma_copy dst %out0_1[0 : [4, 3], [1, 4]], src %arg0_1[8 : [8, 3], [1, 4] + 1*src_offset], src_offset %[[S]]
func.func @main(%x: tensor<6x8xf32>, %i: tensor<i32>) -> tensor<3x4xf32> {
  %c = stablehlo.constant dense<1> : tensor<i32>
  %o = "stablehlo.dynamic_slice"(%x, %c, %i) <{slice_sizes = array<i64: 3, 4>}> : (tensor<6x8xf32>, tensor<i32>, tensor<i32>) -> tensor<3x4xf32>
  func.return %o : tensor<3x4xf32>
}

// -----

// while (lax.fori_loop(0, 2, ...)): the counter folds at compile time, so the loop is unrolled: two multiplies.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.tensor_scalar {{.*}} op0 = "multiply", operand0 = 2.000000e+00 : f32
// CHECK:       penguin.tensor_scalar {{.*}} op0 = "multiply", operand0 = 2.000000e+00 : f32
// CHECK-NOT:   penguin.tensor_scalar
// CHECK:       penguin.return
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = "stablehlo.while"(%zero, %x) ({
  ^bb0(%i: tensor<i32>, %c: tensor<4x8xf32>):
    %n = stablehlo.constant dense<2> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "stablehlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %c: tensor<4x8xf32>):
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    %two = stablehlo.constant dense<2.000000e+00> : tensor<4x8xf32>
    %d = stablehlo.multiply %c, %two : tensor<4x8xf32>
    "stablehlo.return"(%j, %d) : (tensor<i32>, tensor<4x8xf32>) -> ()
  }) : (tensor<i32>, tensor<4x8xf32>) -> (tensor<i32>, tensor<4x8xf32>)
  func.return %r#1 : tensor<4x8xf32>
}
