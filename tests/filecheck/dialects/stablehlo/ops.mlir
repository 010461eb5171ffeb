// RUN: NKIC_ROUNDTRIP
// RUN: nkic-opt %s --split-input-file | nkic-opt --split-input-file | filecheck %s

// The pretty form of every op that has one; the round trip through the generic form gives it back.
// CHECK-LABEL: func.func @pretty
// CHECK-NEXT: %c = stablehlo.constant dense<1.250000e-01> : tensor<f32>
// CHECK-NEXT: %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: %x = stablehlo.add %a, %b : tensor<4x8xf32>
// CHECK-NEXT: %y = stablehlo.exponential %x : tensor<4x8xf32>
// CHECK-NEXT: %z = stablehlo.convert %y : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: %t = stablehlo.transpose %z, dims = [1, 0] : (tensor<4x8xbf16>) -> tensor<8x4xbf16>
// CHECK-NEXT: %r = stablehlo.reshape %t : (tensor<8x4xbf16>) -> tensor<32xbf16>
// CHECK-NEXT: %i = stablehlo.iota dim = 1 : tensor<4x8xi32>
// CHECK-NEXT: %j = stablehlo.iota dim = 0 : tensor<4x8xi32>
// CHECK-NEXT: %p = stablehlo.compare GE, %i, %j, SIGNED : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
// CHECK-NEXT: %s = stablehlo.select %p, %x, %a : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %d = stablehlo.dot_general %s, %w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %e = stablehlo.dot_general %u, %u, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: %m = stablehlo.reduce(%s init: %c) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: func.return %d, %m, %r, %e : tensor<4x3xf32>, tensor<4xf32>, tensor<32xbf16>, tensor<2x4x4xf32>
func.func @pretty(%a: tensor<4x8xf32>, %w: tensor<8x3xf32>, %u: tensor<2x4x8xf32>) -> (tensor<4x3xf32>, tensor<4xf32>, tensor<32xbf16>, tensor<2x4x4xf32>) {
  %c = stablehlo.constant dense<1.250000e-01> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %x = stablehlo.add %a, %b : tensor<4x8xf32>
  %y = stablehlo.exponential %x : tensor<4x8xf32>
  %z = stablehlo.convert %y : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %t = stablehlo.transpose %z, dims = [1, 0] : (tensor<4x8xbf16>) -> tensor<8x4xbf16>
  %r = stablehlo.reshape %t : (tensor<8x4xbf16>) -> tensor<32xbf16>
  %i = stablehlo.iota dim = 1 : tensor<4x8xi32>
  %j = stablehlo.iota dim = 0 : tensor<4x8xi32>
  %p = stablehlo.compare GE, %i, %j, SIGNED : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
  %s = stablehlo.select %p, %x, %a : tensor<4x8xi1>, tensor<4x8xf32>
  %d = stablehlo.dot_general %s, %w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %e = stablehlo.dot_general %u, %u, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %m = stablehlo.reduce(%s init: %c) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %d, %m, %r, %e : tensor<4x3xf32>, tensor<4xf32>, tensor<32xbf16>, tensor<2x4x4xf32>
}

// -----

// The generic form JAX prints (print_generic_op_form=True): opaque #stablehlo<...> attributes, regions, calls.
// CHECK-LABEL: func.func public @main
// CHECK:      %{{.*}} = stablehlo.dot_general %{{.*}}, %{{.*}}, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x4xbf16>, tensor<8x4xbf16>) -> tensor<8x8xbf16>
// CHECK:      stablehlo.compare GE, %{{.*}}, %{{.*}}, SIGNED
// CHECK:      stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.add across dimensions = [1]
// CHECK:      "stablehlo.custom_call"(%{{.*}}) <{call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{\22kernel_name\22: \22m:k\22}"}>
// CHECK:      stablehlo.composite "nkic.attention" %{{.*}} {composite_attributes = {scale = 1.250000e-01 : f32}, decomposition = @dec, version = 0 : i32} : (tensor<8xf32>) -> tensor<8xf32>
"builtin.module"() <{sym_name = "jit_f"}> ({
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<8x4xbf16>) -> tensor<8xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<8x4xbf16>):
    %0 = "stablehlo.dot_general"(%arg0, %arg0) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x4xbf16>, tensor<8x4xbf16>) -> tensor<8x8xbf16>
    %1 = "stablehlo.convert"(%0) : (tensor<8x8xbf16>) -> tensor<8x8xf32>
    %2 = "stablehlo.iota"() <{iota_dimension = 0 : i64}> : () -> tensor<8x8xi32>
    %3 = "stablehlo.iota"() <{iota_dimension = 1 : i64}> : () -> tensor<8x8xi32>
    %4 = "stablehlo.compare"(%2, %3) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<8x8xi32>, tensor<8x8xi32>) -> tensor<8x8xi1>
    %5 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
    %6 = "stablehlo.select"(%4, %1, %5) : (tensor<8x8xi1>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %7 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %8 = "stablehlo.reduce"(%6, %7) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %9 = "stablehlo.add"(%arg1, %arg2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%9) : (tensor<f32>) -> ()
    }) : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
    %10 = "stablehlo.custom_call"(%8) <{call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{\"kernel_name\": \"m:k\"}"}> : (tensor<8xf32>) -> tensor<8xf32>
    %11 = "stablehlo.composite"(%10) <{composite_attributes = {scale = 1.250000e-01 : f32}, decomposition = @dec, name = "nkic.attention", version = 0 : i32}> : (tensor<8xf32>) -> tensor<8xf32>
    "func.return"(%11) : (tensor<8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<8xf32>) -> tensor<8xf32>, sym_name = "dec", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<8xf32>):
    "func.return"(%arg0) : (tensor<8xf32>) -> ()
  }) : () -> ()
}) : () -> ()
