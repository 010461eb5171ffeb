// RUN: nkic-opt %s -p chlo-legalize --split-input-file | filecheck %s

// chlo.square on a real operand is x * x.
// CHECK-LABEL: func.func @square
// CHECK-NEXT:    %0 = stablehlo.multiply %x, %x : tensor<4x8xf32>
// CHECK-NEXT:    func.return %0 : tensor<4x8xf32>
func.func @square(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = chlo.square %x : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// chlo.erf: x clamped into [-4, 4], x * Alpha(x^2) / Beta(x^2) by Horner's rule from the leading coefficient, the
// result clamped into [-1, 1]. bf16 is computed in f32.
// CHECK-LABEL: func.func @erf
// CHECK-NEXT:    %0 = stablehlo.convert %x : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT:    %1 = stablehlo.constant dense<-4.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %2 = stablehlo.maximum %0, %1 : tensor<4xf32>
// CHECK-NEXT:    %3 = stablehlo.constant dense<4.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %4 = stablehlo.minimum %2, %3 : tensor<4xf32>
// CHECK-NEXT:    %5 = stablehlo.multiply %4, %4 : tensor<4xf32>
// CHECK-NEXT:    %6 = stablehlo.constant dense<-2.7261{{[0-9]+}}e-10> : tensor<4xf32>
// CHECK-NEXT:    %7 = stablehlo.multiply %6, %5 : tensor<4xf32>
// CHECK-NEXT:    %8 = stablehlo.constant dense<2.7706{{[0-9]+}}e-08> : tensor<4xf32>
// CHECK-NEXT:    %9 = stablehlo.add %7, %8 : tensor<4xf32>
// CHECK:         stablehlo.constant dense<-0.0160960332> : tensor<4xf32>
// CHECK-NEXT:    %[[ALPHA:.*]] = stablehlo.add
// CHECK-NEXT:    %[[NUM:.*]] = stablehlo.multiply %4, %[[ALPHA]] : tensor<4xf32>
// CHECK-NEXT:    stablehlo.constant dense<-1.45660715e-05> : tensor<4xf32>
// CHECK:         stablehlo.constant dense<-0.0142647391> : tensor<4xf32>
// CHECK-NEXT:    %[[BETA:.*]] = stablehlo.add
// CHECK-NEXT:    %[[ERF:.*]] = stablehlo.divide %[[NUM]], %[[BETA]] : tensor<4xf32>
// CHECK-NEXT:    %[[LO:.*]] = stablehlo.constant dense<-1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = stablehlo.maximum %[[ERF]], %[[LO]] : tensor<4xf32>
// CHECK-NEXT:    %[[HI:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %[[B:.*]] = stablehlo.minimum %[[A]], %[[HI]] : tensor<4xf32>
// CHECK-NEXT:    %[[OUT:.*]] = stablehlo.convert %[[B]] : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT:    func.return %[[OUT]] : tensor<4xbf16>
// CHECK-NOT:     chlo.
func.func @erf(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = chlo.erf %x : tensor<4xbf16> -> tensor<4xbf16>
  func.return %0 : tensor<4xbf16>
}

// -----

// chlo.erfc: 1 - x T(x^2) where |x| < 1, else exp(-x^2) / |x| * (P or R)(1/x^2) (R from |x| >= 2), 0 past maxlog,
// and 2 - erfc(-x) for x < 0.
// CHECK-LABEL: func.func @erfc
// CHECK:         %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK:         stablehlo.constant dense<7.85386146e-05> : tensor<4xf32>
// CHECK:         %[[ERF:.*]] = stablehlo.multiply %x, %{{.*}} : tensor<4xf32>
// CHECK-NEXT:    %[[ABS:.*]] = stablehlo.abs %x : tensor<4xf32>
// CHECK-NEXT:    %[[SMALL:.*]] = stablehlo.compare LT, %[[ABS]], %[[ONE]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    %[[NEAR:.*]] = stablehlo.subtract %[[ONE]], %[[ERF]] : tensor<4xf32>
// CHECK-NEXT:    %[[X2:.*]] = stablehlo.multiply %x, %x : tensor<4xf32>
// CHECK-NEXT:    %[[Z:.*]] = stablehlo.negate %[[X2]] : tensor<4xf32>
// CHECK:         stablehlo.exponential %[[Z]] : tensor<4xf32>
// CHECK:         stablehlo.constant dense<2.326820e-02> : tensor<4xf32>
// CHECK:         stablehlo.constant dense<0.563825965> : tensor<4xf32>
// CHECK:         stablehlo.constant dense<-10.477664> : tensor<4xf32>
// CHECK:         stablehlo.constant dense<0.564189494> : tensor<4xf32>
// CHECK:         %[[MAXLOG:.*]] = stablehlo.constant dense<-88.7228394> : tensor<4xf32>
// CHECK-NEXT:    %[[BIG:.*]] = stablehlo.compare LT, %[[Z]], %[[MAXLOG]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    %[[APPROX:.*]] = stablehlo.multiply %{{.*}}, %{{.*}} : tensor<4xf32>
// CHECK-NEXT:    %[[CLAMPED:.*]] = stablehlo.select %[[BIG]], %{{.*}}, %[[APPROX]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    %[[NEG:.*]] = stablehlo.compare LT, %x, %{{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    %[[REFL:.*]] = stablehlo.subtract %{{.*}}, %[[CLAMPED]] : tensor<4xf32>
// CHECK-NEXT:    %[[FAR:.*]] = stablehlo.select %[[NEG]], %[[REFL]], %[[CLAMPED]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    %[[OUT:.*]] = stablehlo.select %[[SMALL]], %[[NEAR]], %[[FAR]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    func.return %[[OUT]] : tensor<4xf32>
func.func @erfc(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.erfc %x : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// chlo.top_k: a stable sort of (values, iota) along the last dimension, GT in total order, sliced to k.
// CHECK-LABEL: func.func @top_k
// CHECK-NEXT:    %0 = stablehlo.iota dim = 1 : tensor<8x16xi32>
// CHECK-NEXT:    %1, %2 = "stablehlo.sort"(%x, %0) <{dimension = 1 : i64, is_stable = true}> ({
// CHECK-NEXT:    ^bb0(%3: tensor<f32>, %4: tensor<f32>, %5: tensor<i32>, %6: tensor<i32>):
// CHECK-NEXT:      %7 = stablehlo.compare GT, %3, %4, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return %7 : tensor<i1>
// CHECK-NEXT:    }) : (tensor<8x16xf32>, tensor<8x16xi32>) -> (tensor<8x16xf32>, tensor<8x16xi32>)
// CHECK-NEXT:    %values = stablehlo.slice %1 [0:8, 0:4] : (tensor<8x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %indices = stablehlo.slice %2 [0:8, 0:4] : (tensor<8x16xi32>) -> tensor<8x4xi32>
// CHECK-NEXT:    func.return %values, %indices : tensor<8x4xf32>, tensor<8x4xi32>
func.func @top_k(%x: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x4xi32>) {
  %values, %indices = chlo.top_k(%x, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
  func.return %values, %indices : tensor<8x4xf32>, tensor<8x4xi32>
}

// -----

// chlo.erf_inv: w = -log1p(-x^2); Giles' polynomial in w - 2.5 (w < 5) or sqrt(w) - 3, each coefficient selected
// by w < 5; x * inf where |x| = 1.
// CHECK-LABEL: func.func @erf_inv
// CHECK-NEXT:    %0 = stablehlo.negate %x : tensor<4xf32>
// CHECK-NEXT:    %1 = stablehlo.multiply %x, %0 : tensor<4xf32>
// CHECK-NEXT:    %2 = stablehlo.log_plus_one %1 : tensor<4xf32>
// CHECK-NEXT:    %[[W:.*]] = stablehlo.negate %2 : tensor<4xf32>
// CHECK-NEXT:    %[[FIVE:.*]] = stablehlo.constant dense<5.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %[[LT:.*]] = stablehlo.compare LT, %[[W]], %[[FIVE]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK:         stablehlo.constant dense<2.81022636e-08> : tensor<4xf32>
// CHECK-NEXT:    stablehlo.constant dense<-0.000200214257> : tensor<4xf32>
// CHECK-NEXT:    stablehlo.select %[[LT]]
// CHECK:         %[[INF:.*]] = stablehlo.constant dense<0x7f800000> : tensor<4xf32>
// CHECK-NEXT:    %[[XINF:.*]] = stablehlo.multiply %x, %[[INF]] : tensor<4xf32>
// CHECK-NEXT:    %[[R:.*]] = stablehlo.multiply %{{.*}}, %x : tensor<4xf32>
// CHECK-NEXT:    %[[OUT:.*]] = stablehlo.select %{{.*}}, %[[XINF]], %[[R]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    func.return %[[OUT]] : tensor<4xf32>
func.func @erf_inv(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.erf_inv %x : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
