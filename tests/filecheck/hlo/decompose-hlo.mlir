// RUN: nkic-opt %s -p decompose-hlo --split-input-file | filecheck %s

// clamp with scalar bounds: each broadcast to the operand's shape, then maximum and minimum.
// CHECK-LABEL: func.func @clamp
// CHECK-NEXT:    %0 = stablehlo.broadcast_in_dim %lo, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = stablehlo.maximum %x, %0 : tensor<4x8xf32>
// CHECK-NEXT:    %2 = stablehlo.broadcast_in_dim %hi, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %3 = stablehlo.minimum %1, %2 : tensor<4x8xf32>
// CHECK-NEXT:    func.return %3 : tensor<4x8xf32>
func.func @clamp(%lo: tensor<f32>, %x: tensor<4x8xf32>, %hi: tensor<f32>) -> tensor<4x8xf32> {
  %0 = stablehlo.clamp %lo, %x, %hi : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// case: every branch cloned out in order, then from the last branch down a select on index == k per result (the
// scalar predicate broadcast to the tensor result), so an out-of-range index takes the last branch.
// CHECK-LABEL: func.func @case
// CHECK-NEXT:    %[[B0:.*]] = stablehlo.multiply %x, %x : tensor<4x8xf32>
// CHECK-NEXT:    %[[S0:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[B1:.*]] = stablehlo.negate %x : tensor<4x8xf32>
// CHECK-NEXT:    %[[S1:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[B2:.*]] = stablehlo.exponential %x : tensor<4x8xf32>
// CHECK-NEXT:    %[[S2:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[K1:.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    %[[H1:.*]] = stablehlo.compare EQ, %i, %[[K1]] : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:    %[[P1:.*]] = stablehlo.broadcast_in_dim %[[H1]], dims = [] : (tensor<i1>) -> tensor<4x8xi1>
// CHECK-NEXT:    %[[T1:.*]] = stablehlo.select %[[P1]], %[[B1]], %[[B2]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT:    %[[U1:.*]] = stablehlo.select %[[H1]], %[[S1]], %[[S2]] : tensor<i1>, tensor<f32>
// CHECK-NEXT:    %[[K0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    %[[H0:.*]] = stablehlo.compare EQ, %i, %[[K0]] : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:    %[[P0:.*]] = stablehlo.broadcast_in_dim %[[H0]], dims = [] : (tensor<i1>) -> tensor<4x8xi1>
// CHECK-NEXT:    %[[T0:.*]] = stablehlo.select %[[P0]], %[[B0]], %[[T1]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT:    %[[U0:.*]] = stablehlo.select %[[H0]], %[[S0]], %[[U1]] : tensor<i1>, tensor<f32>
// CHECK-NEXT:    func.return %[[T0]], %[[U0]] : tensor<4x8xf32>, tensor<f32>
func.func @case(%i: tensor<i32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %0:2 = "stablehlo.case"(%i) ({
    %a = stablehlo.multiply %x, %x : tensor<4x8xf32>
    %s = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    stablehlo.return %a, %s : tensor<4x8xf32>, tensor<f32>
  }, {
    %a = stablehlo.negate %x : tensor<4x8xf32>
    %s = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    stablehlo.return %a, %s : tensor<4x8xf32>, tensor<f32>
  }, {
    %a = stablehlo.exponential %x : tensor<4x8xf32>
    %s = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    stablehlo.return %a, %s : tensor<4x8xf32>, tensor<f32>
  }) : (tensor<i32>) -> (tensor<4x8xf32>, tensor<f32>)
  func.return %0#0, %0#1 : tensor<4x8xf32>, tensor<f32>
}

// -----

// One pass, innermost first: the clamp in branch 0 and the case nested in branch 1 are decomposed inside their
// branches before the outer case clones the branches out, so nothing the clones bring is left undecomposed.
// CHECK-LABEL: func.func @case_nested
// CHECK-NEXT:    %[[L:.*]] = stablehlo.broadcast_in_dim %lo, dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[M:.*]] = stablehlo.maximum %x, %[[L]] : tensor<4xf32>
// CHECK-NEXT:    %[[H:.*]] = stablehlo.broadcast_in_dim %hi, dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[C:.*]] = stablehlo.minimum %[[M]], %[[H]] : tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = stablehlo.negate %x : tensor<4xf32>
// CHECK-NEXT:    %[[KJ:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    %[[HJ:.*]] = stablehlo.compare EQ, %j, %[[KJ]] : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:    %[[PJ:.*]] = stablehlo.broadcast_in_dim %[[HJ]], dims = [] : (tensor<i1>) -> tensor<4xi1>
// CHECK-NEXT:    %[[N:.*]] = stablehlo.select %[[PJ]], %[[A]], %x : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    %[[KI:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    %[[HI:.*]] = stablehlo.compare EQ, %i, %[[KI]] : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:    %[[PI:.*]] = stablehlo.broadcast_in_dim %[[HI]], dims = [] : (tensor<i1>) -> tensor<4xi1>
// CHECK-NEXT:    %[[R:.*]] = stablehlo.select %[[PI]], %[[C]], %[[N]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<4xf32>
// CHECK-NOT:     stablehlo.case
// CHECK-NOT:     stablehlo.clamp
func.func @case_nested(%i: tensor<i32>, %j: tensor<i32>, %lo: tensor<f32>, %x: tensor<4xf32>, %hi: tensor<f32>) -> tensor<4xf32> {
  %0 = "stablehlo.case"(%i) ({
    %c = stablehlo.clamp %lo, %x, %hi : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    stablehlo.return %c : tensor<4xf32>
  }, {
    %n = "stablehlo.case"(%j) ({
      %a = stablehlo.negate %x : tensor<4xf32>
      stablehlo.return %a : tensor<4xf32>
    }, {
      stablehlo.return %x : tensor<4xf32>
    }) : (tensor<i32>) -> tensor<4xf32>
    stablehlo.return %n : tensor<4xf32>
  }) : (tensor<i32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
