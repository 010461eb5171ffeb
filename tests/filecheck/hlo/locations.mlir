// RUN: nkic-opt %s -p stablehlo-to-penguin | filecheck %s

// Every instruction an op lowers to carries the op's place: the JAX source line its loc gives (the callee of the call
// site, through #loc aliases MLIR prints after the module and file:line:col ranges), and in its call the op, its JAX
// name and its MLIR line:col; an op the text does not locate is at its MLIR line.
// CHECK:      penguin.activation {{.*}}{loc = "model.py:12:8", call = "stablehlo.exponential jit(f)/exp {{.*}}locations.mlir:11:5 nl.exp"
// CHECK:      penguin.tensor_reduce {{.*}}{loc = "{{.*}}locations.mlir:13:5", call = "stablehlo.reduce nl.sum"
#loc1 = loc("x")
module @jit_f {
  func.func public @main(%arg0: tensor<4x8xf32> loc("x")) -> tensor<4xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<4x8xf32> loc(#loc5)
    %c = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    return %1 : tensor<4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("model.py":12:8 to :20)
#loc3 = loc("run.py":3:0 to 4:1)
#loc4 = loc("f"(#loc2))
#loc5 = loc("jit(f)/exp"(callsite(#loc4 at #loc3)))
