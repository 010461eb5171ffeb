builtin.module {
  penguin.graph @main {
  ^bb0(%a: !penguin.tensor<shared_hbm, 128x64xf32>):
    %o = penguin.kernel_node @k(%a) {kind = "external", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 128x64xf32>) -> !penguin.tensor<shared_hbm, 128x64xf32>
    penguin.graph_return %o : !penguin.tensor<shared_hbm, 128x64xf32>
  }
  penguin.kernel @k : (!penguin.tensor<shared_hbm, 128x64xf32>) -> !penguin.tensor<shared_hbm, 128x64xf32> program {
  ^bb0(%a: !penguin.tensor<shared_hbm, 128x64xf32>):
    %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 128x64xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x64xf32>
    penguin.dma_copy dst %x[0 : [64, 128], [1, 64]], src %a[0 : [64, 128], [1, 64]]
    penguin.tensor_tensor dst %x[0 : [64, 128], [1, 64]], data1 %x[0 : [64, 128], [1, 64]], data2 %x[0 : [64, 128], [1, 64]] {op = "add"}
    penguin.dma_copy dst %out[0 : [64, 128], [1, 64]], src %x[0 : [64, 128], [1, 64]]
    penguin.return %out : !penguin.tensor<shared_hbm, 128x64xf32>
  }
}
