// RUN: nkic-opt %s --split-input-file | nkic-opt --split-input-file | filecheck %s

// jax-ops.mlir's module in the generic form (what get_asm(print_generic_op_form=True) prints): read, printed in the
// pretty form and read back, to the same text.

// CHECK-LABEL: func.func @unary(%x: tensor<8x16xf32>) -> (tensor<8x16xi1>, tensor<8x16xf32>) {
// CHECK-NEXT:  %0 = stablehlo.is_finite %x : (tensor<8x16xf32>) -> tensor<8x16xi1>
// CHECK-NEXT:  %1 = stablehlo.reverse %x, dims = [1] : tensor<8x16xf32>
// CHECK-NEXT:  func.return %0, %1 : tensor<8x16xi1>, tensor<8x16xf32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "unary", function_type = (tensor<8x16xf32>) -> (tensor<8x16xi1>, tensor<8x16xf32>)}> ({
  ^bb0(%x: tensor<8x16xf32>):
    %0 = "stablehlo.is_finite"(%x) : (tensor<8x16xf32>) -> tensor<8x16xi1>
    %1 = "stablehlo.reverse"(%x) <{dimensions = array<i64: 1>}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
    "func.return"(%0, %1) : (tensor<8x16xi1>, tensor<8x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @data(%x: tensor<8x16xf32>, %u: tensor<2x16xf32>, %i: tensor<i32>, %v: tensor<f32>) -> (tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>) {
// CHECK-NEXT:  %0 = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<8x16xf32>, tensor<2x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %1 = stablehlo.slice %x [0:8:2, 4:10:2] : (tensor<8x16xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:  %2 = stablehlo.slice %x [0:8, 0:4] : (tensor<8x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:  %3 = stablehlo.concatenate %x, %2, dim = 1 : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
// CHECK-NEXT:  %4 = stablehlo.pad %x, %v, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<10x16xf32>
// CHECK-NEXT:  %5 = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<2x16xf32>
// CHECK-NEXT:  func.return %0, %1, %3, %4, %5 : tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "data", function_type = (tensor<8x16xf32>, tensor<2x16xf32>, tensor<i32>, tensor<f32>) -> (tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>)}> ({
  ^bb0(%x: tensor<8x16xf32>, %u: tensor<2x16xf32>, %i: tensor<i32>, %v: tensor<f32>):
    %0 = "stablehlo.dynamic_update_slice"(%x, %u, %i, %i) : (tensor<8x16xf32>, tensor<2x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>
    %1 = "stablehlo.slice"(%x) <{start_indices = array<i64: 0, 4>, limit_indices = array<i64: 8, 10>, strides = array<i64: 2, 2>}> : (tensor<8x16xf32>) -> tensor<4x3xf32>
    %2 = "stablehlo.slice"(%x) <{start_indices = array<i64: 0, 0>, limit_indices = array<i64: 8, 4>, strides = array<i64: 1, 1>}> : (tensor<8x16xf32>) -> tensor<8x4xf32>
    %3 = "stablehlo.concatenate"(%x, %2) <{dimension = 1 : i64}> : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
    %4 = "stablehlo.pad"(%x, %v) <{edge_padding_low = array<i64: 1, 0>, edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>}> : (tensor<8x16xf32>, tensor<f32>) -> tensor<10x16xf32>
    %5 = "stablehlo.dynamic_slice"(%x, %i, %i) <{slice_sizes = array<i64: 2, 16>}> : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<2x16xf32>
    "func.return"(%0, %1, %3, %4, %5) : (tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @regions(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>) {
// CHECK-NEXT:  %iota = stablehlo.iota dim = 1 : tensor<8x16xi32>
// CHECK-NEXT:  %0, %1 = "stablehlo.sort"(%x, %iota) <{dimension = 1 : i64, is_stable = true}> ({
// CHECK-NEXT:  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
// CHECK-NEXT:  %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:  stablehlo.return %lt : tensor<i1>
// CHECK-NEXT:  }) : (tensor<8x16xf32>, tensor<8x16xi32>) -> (tensor<8x16xf32>, tensor<8x16xi32>)
// CHECK-NEXT:  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:  %2 = "stablehlo.reduce_window"(%x, %zero) <{padding = dense<[[0, 0], [15, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 16>, window_strides = array<i64: 1, 1>}> ({
// CHECK-NEXT:  ^bb0(%a_1: tensor<f32>, %b_1: tensor<f32>):
// CHECK-NEXT:  %s = stablehlo.add %a_1, %b_1 : tensor<f32>
// CHECK-NEXT:  stablehlo.return %s : tensor<f32>
// CHECK-NEXT:  }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %c0 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:  %3, %4 = stablehlo.reduce(%x init: %zero), (%iota init: %c0) across dimensions = [1] : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>) reducer(%a_2: tensor<f32>, %c_1: tensor<f32>) (%b_2: tensor<i32>, %d_1: tensor<i32>) {
// CHECK-NEXT:  %gt = stablehlo.compare GT, %a_2, %c_1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:  %m = stablehlo.select %gt, %a_2, %c_1 : tensor<i1>, tensor<f32>
// CHECK-NEXT:  %j = stablehlo.select %gt, %b_2, %d_1 : tensor<i1>, tensor<i32>
// CHECK-NEXT:  stablehlo.return %m, %j : tensor<f32>, tensor<i32>
// CHECK-NEXT:  }
// CHECK-NEXT:  %5, %6 = stablehlo.while(%n = %c0, %y = %x) : tensor<i32>, tensor<8x16xf32> cond {
// CHECK-NEXT:  %three = stablehlo.constant dense<3> : tensor<i32>
// CHECK-NEXT:  %more = stablehlo.compare LT, %n, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:  stablehlo.return %more : tensor<i1>
// CHECK-NEXT:  } do {
// CHECK-NEXT:  %one = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:  %next = stablehlo.add %n, %one : tensor<i32>
// CHECK-NEXT:  %twice = stablehlo.add %y, %y : tensor<8x16xf32>
// CHECK-NEXT:  stablehlo.return %next, %twice : tensor<i32>, tensor<8x16xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %0, %1, %2, %3, %4, %5, %6 : tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "regions", function_type = (tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>)}> ({
  ^bb0(%x: tensor<8x16xf32>):
    %iota = "stablehlo.iota"() <{iota_dimension = 1 : i64}> : () -> tensor<8x16xi32>
    %0, %1 = "stablehlo.sort"(%x, %iota) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
      %lt = "stablehlo.compare"(%a, %b) <{comparison_direction = #stablehlo.comparison_direction<LT>, compare_type = #stablehlo.comparison_type<TOTALORDER>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "stablehlo.return"(%lt) : (tensor<i1>) -> ()
    }) : (tensor<8x16xf32>, tensor<8x16xi32>) -> (tensor<8x16xf32>, tensor<8x16xi32>)
    %zero = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %2 = "stablehlo.reduce_window"(%x, %zero) <{padding = dense<[[0, 0], [15, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 16>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%a_1: tensor<f32>, %b_1: tensor<f32>):
      %s = "stablehlo.add"(%a_1, %b_1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %c0 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %3, %4 = "stablehlo.reduce"(%x, %iota, %zero, %c0) <{dimensions = array<i64: 1>}> ({
    ^bb0(%a_2: tensor<f32>, %b_2: tensor<i32>, %c_1: tensor<f32>, %d_1: tensor<i32>):
      %gt = "stablehlo.compare"(%a_2, %c_1) <{comparison_direction = #stablehlo.comparison_direction<GT>, compare_type = #stablehlo.comparison_type<FLOAT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %m = "stablehlo.select"(%gt, %a_2, %c_1) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %j = "stablehlo.select"(%gt, %b_2, %d_1) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
      "stablehlo.return"(%m, %j) : (tensor<f32>, tensor<i32>) -> ()
    }) : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>)
    %5, %6 = "stablehlo.while"(%c0, %x) ({
    ^bb0(%n: tensor<i32>, %y: tensor<8x16xf32>):
      %three = "stablehlo.constant"() <{value = dense<3> : tensor<i32>}> : () -> tensor<i32>
      %more = "stablehlo.compare"(%n, %three) <{comparison_direction = #stablehlo.comparison_direction<LT>, compare_type = #stablehlo.comparison_type<SIGNED>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
      "stablehlo.return"(%more) : (tensor<i1>) -> ()
    }, {
    ^bb0(%n_1: tensor<i32>, %y_1: tensor<8x16xf32>):
      %one = "stablehlo.constant"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>
      %next = "stablehlo.add"(%n_1, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %twice = "stablehlo.add"(%y_1, %y_1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      "stablehlo.return"(%next, %twice) : (tensor<i32>, tensor<8x16xf32>) -> ()
    }) : (tensor<i32>, tensor<8x16xf32>) -> (tensor<i32>, tensor<8x16xf32>)
    "func.return"(%0, %1, %2, %3, %4, %5, %6) : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @scatter(%x: tensor<4x16xf32>, %i: tensor<8x1xi32>, %u: tensor<8x16xf32>) -> tensor<4x16xf32> {
// CHECK-NEXT:  %0 = "stablehlo.scatter"(%x, %i, %u) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
// CHECK-NEXT:  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
// CHECK-NEXT:  %s = stablehlo.add %a, %b : tensor<f32>
// CHECK-NEXT:  stablehlo.return %s : tensor<f32>
// CHECK-NEXT:  }) : (tensor<4x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:  func.return %0 : tensor<4x16xf32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "scatter", function_type = (tensor<4x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<4x16xf32>}> ({
  ^bb0(%x: tensor<4x16xf32>, %i: tensor<8x1xi32>, %u: tensor<8x16xf32>):
    %0 = "stablehlo.scatter"(%x, %i, %u) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) : (tensor<4x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    "func.return"(%0) : (tensor<4x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @conv(%x: tensor<1x4x16xf32>, %w: tensor<8x4x3xf32>, %y: tensor<1x8x8x3xf32>, %k: tensor<3x3x3x4xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x8x4xf32>) {
// CHECK-NEXT:  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1], pad = [[1, 1]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {feature_group_count = 1 : i64, batch_group_count = 1 : i64, precision_config = [#stablehlo.precision<DEFAULT>, #stablehlo.precision<DEFAULT>]} : (tensor<1x4x16xf32>, tensor<8x4x3xf32>) -> tensor<1x8x16xf32>
// CHECK-NEXT:  %1 = stablehlo.convolution(%y, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {feature_group_count = 1 : i64, batch_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT:  func.return %0, %1 : tensor<1x8x16xf32>, tensor<1x8x8x4xf32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "conv", function_type = (tensor<1x4x16xf32>, tensor<8x4x3xf32>, tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x8x4xf32>)}> ({
  ^bb0(%x: tensor<1x4x16xf32>, %w: tensor<8x4x3xf32>, %y: tensor<1x8x8x3xf32>, %k: tensor<3x3x3x4xf32>):
    %0 = "stablehlo.convolution"(%x, %w) <{dimension_numbers = #stablehlo.conv<[b, f, 0]x[o, i, 0]->[b, f, 0]>, window_strides = array<i64: 1>, padding = dense<1> : tensor<1x2xi64>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, window_reversal = array<i1: false>, feature_group_count = 1 : i64, batch_group_count = 1 : i64, precision_config = [#stablehlo.precision<DEFAULT>, #stablehlo.precision<DEFAULT>]}> : (tensor<1x4x16xf32>, tensor<8x4x3xf32>) -> tensor<1x8x16xf32>
    %1 = "stablehlo.convolution"(%y, %k) <{dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, window_strides = array<i64: 1, 1>, padding = dense<1> : tensor<2x2xi64>, feature_group_count = 1 : i64, batch_group_count = 1 : i64}> : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x8x8x4xf32>
    "func.return"(%0, %1) : (tensor<1x8x16xf32>, tensor<1x8x8x4xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @calls(%x: tensor<8x16xf32>, %w: tensor<1x128x2x1x64xbf16>, %z: tensor<1x128x2x64xbf16>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>) {
// CHECK-NEXT:  %0 = stablehlo.composite "my.gelu" %x {composite_attributes = {approximate = true}, decomposition = @gelu, version = 1 : i32} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %1, %2 = stablehlo.optimization_barrier %0, %x : tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:  %3 = "stablehlo.custom_call"(%1) <{call_target_name = "Sharding"}> {mhlo.sharding = "{replicated}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %4 = stablehlo.dot_general %w, %z, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT], algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false> : (tensor<1x128x2x1x64xbf16>, tensor<1x128x2x64xbf16>) -> tensor<1x2x128x1x128xf32>
// CHECK-NEXT:  func.return %2, %3, %4 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @gelu(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:  func.return %x : tensor<8x16xf32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "calls", function_type = (tensor<8x16xf32>, tensor<1x128x2x1x64xbf16>, tensor<1x128x2x64xbf16>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>)}> ({
  ^bb0(%x: tensor<8x16xf32>, %w: tensor<1x128x2x1x64xbf16>, %z: tensor<1x128x2x64xbf16>):
    %0 = "stablehlo.composite"(%x) <{name = "my.gelu", composite_attributes = {approximate = true}, decomposition = @gelu, version = 1 : i32}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %1, %2 = "stablehlo.optimization_barrier"(%0, %x) : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
    %3 = "stablehlo.custom_call"(%1) <{call_target_name = "Sharding"}> {mhlo.sharding = "{replicated}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %4 = "stablehlo.dot_general"(%w, %z) <{precision_config = [#stablehlo.precision<DEFAULT>, #stablehlo.precision<DEFAULT>], algorithm = #stablehlo.dot_algorithm<lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false>, dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0, 2], rhs_batching_dimensions = [0, 2], lhs_contracting_dimensions = [4], rhs_contracting_dimensions = [3]>}> : (tensor<1x128x2x1x64xbf16>, tensor<1x128x2x64xbf16>) -> tensor<1x2x128x1x128xf32>
    "func.return"(%2, %3, %4) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>) -> ()
  }) : () -> ()
  "func.func"() <{sym_name = "gelu", function_type = (tensor<8x16xf32>) -> tensor<8x16xf32>, sym_visibility = "private"}> ({
  ^bb0(%x: tensor<8x16xf32>):
    "func.return"(%x) : (tensor<8x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @chlo(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>) {
// CHECK-NEXT:  %0 = chlo.square %x : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT:  %1 = chlo.erf %x : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT:  %2 = chlo.erfc %x : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT:  %values, %indices = chlo.top_k(%x, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
// CHECK-NEXT:  func.return %0, %1, %2, %values, %indices : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>
// CHECK-NEXT:  }
"builtin.module"() ({
  "func.func"() <{sym_name = "chlo", function_type = (tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>)}> ({
  ^bb0(%x: tensor<8x16xf32>):
    %0 = "chlo.square"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %1 = "chlo.erf"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %2 = "chlo.erfc"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %values, %indices = "chlo.top_k"(%x) <{k = 4 : i64}> : (tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x4xi32>)
    "func.return"(%0, %1, %2, %values, %indices) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @erf_inv(%x: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
// CHECK-NEXT:  %0 = chlo.erf_inv %x : tensor<8x16xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT:  func.return %0 : tensor<8x16xbf16>
"builtin.module"() ({
  "func.func"() <{sym_name = "erf_inv", function_type = (tensor<8x16xbf16>) -> tensor<8x16xbf16>}> ({
  ^bb0(%x: tensor<8x16xbf16>):
    %0 = "chlo.erf_inv"(%x) : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
    "func.return"(%0) : (tensor<8x16xbf16>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK-LABEL: func.func @control(%i: tensor<i32>, %x: tensor<4x8xf32>, %lo: tensor<f32>) -> (tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT:  %c = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:  %0 = stablehlo.clamp %c, %i, %c : tensor<i32>
// CHECK-NEXT:  %1 = stablehlo.clamp %lo, %x, %lo : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %2 = "stablehlo.case"(%0) ({
// CHECK-NEXT:  stablehlo.return %x : tensor<4x8xf32>
// CHECK-NEXT:  }, {
// CHECK-NEXT:  %3 = stablehlo.negate %x : tensor<4x8xf32>
// CHECK-NEXT:  stablehlo.return %3 : tensor<4x8xf32>
// CHECK-NEXT:  }) : (tensor<i32>) -> tensor<4x8xf32>
// CHECK-NEXT:  func.return %0, %1, %2 : tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>
"builtin.module"() ({
  "func.func"() <{sym_name = "control", function_type = (tensor<i32>, tensor<4x8xf32>, tensor<f32>) -> (tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>)}> ({
  ^bb0(%i: tensor<i32>, %x: tensor<4x8xf32>, %lo: tensor<f32>):
    %c = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %0 = "stablehlo.clamp"(%c, %i, %c) : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.clamp"(%lo, %x, %lo) : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %2 = "stablehlo.case"(%0) ({
      "stablehlo.return"(%x) : (tensor<4x8xf32>) -> ()
    }, {
      %3 = "stablehlo.negate"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      "stablehlo.return"(%3) : (tensor<4x8xf32>) -> ()
    }) : (tensor<i32>) -> tensor<4x8xf32>
    "func.return"(%0, %1, %2) : (tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>) -> ()
  }) : () -> ()
}) : () -> ()
