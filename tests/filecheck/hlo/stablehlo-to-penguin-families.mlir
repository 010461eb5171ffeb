// RUN: nkic-opt %s -p stablehlo-to-penguin --split-input-file | filecheck %s

// The per-family lowerings (nkic/hlo/families.py), op by op.

// reverse: one DMA whose source walks the reversed dim backwards from its last element.
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.dma_copy dst %out0_1[0 : [16, 4], [1, 16]], src %arg0_1[15 : [16, 4], [-1, 16]]
func.func @main(%a: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %o = stablehlo.reverse %a, dims = [1] : tensor<4x16xf32>
  func.return %o : tensor<4x16xf32>
}

// -----

// argmax (a two-result reduce with the iota): max8, then find_index8 of its values; slot 0 of each stored.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.max8 dst %[[TOP:sbuf_[0-9]+]][0 : [8, 4], [1, 8]], src %[[X:sbuf]][0 : [16, 4], [1, 16]]
// CHECK:       penguin.find_index8 dst %{{.*}}, data %[[X]][0 : [16, 4], [1, 16]], vals %[[TOP]][0 : [8, 4], [1, 8]]
func.func @main(%a: tensor<4x16xf32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<4x16xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = "stablehlo.reduce"(%a, %i, %ninf, %z) <{dimensions = array<i64: 1>}> ({
  ^bb0(%a1: tensor<f32>, %i1: tensor<i32>, %a2: tensor<f32>, %i2: tensor<i32>):
    %gt = stablehlo.compare GT, %a1, %a2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a1, %a2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %i1, %i2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %pick = stablehlo.or %gt, %tie : tensor<i1>
    %v = stablehlo.select %gt, %a1, %a2 : tensor<i1>, tensor<f32>
    %j = stablehlo.select %pick, %i1, %i2 : tensor<i1>, tensor<i32>
    stablehlo.return %v, %j : tensor<f32>, tensor<i32>
  }) : (tensor<4x16xf32>, tensor<4x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
  func.return %r#0, %r#1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// cumsum (reduce_window over the whole row, 15 low padding): one running sum per row tile on VectorE.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.tensor_scalar_cumulative {{.*}} op0 = "multiply", op1 = "add", imm0 = 1.000000e+00 : f32, reduce_cmd = "reset_reduce"
func.func @main(%a: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %o = "stablehlo.reduce_window"(%a, %z) <{padding = dense<[[0, 0], [15, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 16>}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  func.return %o : tensor<4x16xf32>
}

// -----

// while with a run-time trip count: the loop values copied into state tensors, the condition loaded into a
// register, and one device loop whose body writes the new values back and reloads the condition.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.register_load src %[[P:t[0-9]+]]
// CHECK:       penguin.loop_begin
// CHECK:       penguin.dma_copy dst %[[S:t[0-9]+]][0 : [1, 64]], src %t{{[0-9]+}}[0 : [1, 64]]
// CHECK:       penguin.register_load
// CHECK:       penguin.loop_end
func.func @main(%a: tensor<4x16xf32>, %n: tensor<i32>) -> tensor<4x16xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %m = %n, %x = %a) : tensor<i32>, tensor<i32>, tensor<4x16xf32>
  cond {
    %p = stablehlo.compare LT, %i, %m, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %i2 = stablehlo.add %i, %one : tensor<i32>
    %x2 = stablehlo.add %x, %x : tensor<4x16xf32>
    stablehlo.return %i2, %m, %x2 : tensor<i32>, tensor<i32>, tensor<4x16xf32>
  }
  func.return %r#2 : tensor<4x16xf32>
}
