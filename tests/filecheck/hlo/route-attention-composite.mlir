// RUN: nkic-opt %s -p route-attention-composite | filecheck %s
// RUN: xdsl-opt %s -p route-attention-composite | filecheck %s

// A composite whose name says attention becomes the attention custom call, its attributes (scale, causal, window)
// the kernel's arguments; the decomposition is not looked at (here it is not even attention).
// CHECK:      func.func @main
// CHECK:      "stablehlo.custom_call"({{.*}}) <{call_target_name = "CausalAttentionMMSoftmaxMMWithoutSwap", backend_config = "{{.*}}\22is_causal\22: true, \22kernel_name\22: \22flash_attention\22{{.*}}\22scale\22: 0.25, \22sliding_window\22: 64}"
// CHECK-NOT:  stablehlo.composite "nkic.flash_attention"
// A composite of another name stays.
// CHECK:      stablehlo.composite "nkic.gelu" %{{.*}} {decomposition = @gelu}
func.func @main(%q: tensor<2x128x64xbf16>, %k: tensor<2x256x64xbf16>, %v: tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16> {
  %o = "stablehlo.composite"(%q, %k, %v) <{name = "nkic.flash_attention", composite_attributes = {causal = true, scale = 2.500000e-01 : f32, window = 64 : i64}, decomposition = @decomp}> : (tensor<2x128x64xbf16>, tensor<2x256x64xbf16>, tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16>
  %g = "stablehlo.composite"(%o) <{name = "nkic.gelu", decomposition = @gelu}> : (tensor<2x128x64xbf16>) -> tensor<2x128x64xbf16>
  func.return %g : tensor<2x128x64xbf16>
}
func.func private @decomp(%q: tensor<2x128x64xbf16>, %k: tensor<2x256x64xbf16>, %v: tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16> {
  func.return %q : tensor<2x128x64xbf16>
}
func.func private @gelu(%x: tensor<2x128x64xbf16>) -> tensor<2x128x64xbf16> {
  func.return %x : tensor<2x128x64xbf16>
}
