// RUN: nkic-opt %s -p nkic-pipeline -t isa-dump | filecheck %s
// RUN: nkic-opt %s -p nkic-pipeline -t neff -o %t.neff | filecheck %s --check-prefix=NEFF
// RUN: nkic info %t.neff | filecheck %s --check-prefix=INFO

// The encoding FileCheck can see: per engine, each 64-byte record in hex beside its decoded form.
// CHECK: var a id=0 input float32[128, 512]
// CHECK-NEXT: var out id=1 output float32[128, 512]
// CHECK-NEXT: sg00 act: 1 instructions, 208 bytes
// CHECK-NEXT: [0] 0701000008010000010000000100000000000100ffffffffffffffff010000000000803f00000000000000000000000000000000000000000000000000000000
// CHECK-NEXT: "func": "exp"{{.*}}"mnemonic": "ACTIVATE"{{.*}}"signal": 1, "wait": {"sem": 8, "value": 1}
// CHECK-NEXT: sg00 sp: 2 instructions, 384 bytes
// CHECK-NEXT: [0] 01040000ff080000000000000000000000000100ffffffffffffffff000000000000000000000000000000000000000000000000000000000000000000000000
// CHECK-NEXT: "mnemonic": "DMA_COPY"{{.*}}"signal": 8, "wait": null
// CHECK-NEXT: [1] 0104000001090000010000000200000002000300ffffffffffffffff010000000000000000000000000000000000000000000000000000000000000000000000
// CHECK-NEXT: "mnemonic": "DMA_COPY"{{.*}}"signal": 9, "wait": {"sem": 1, "value": 1}

// NEFF: wrote {{[0-9]+}} bytes to {{.*}}.neff
// INFO: NEFF kernel: 1 subgraph(s)
// INFO: var a: input float32[128, 512]
// INFO: sg00: pe 0, act 1, dve 0, pool 0, sp 2

builtin.module {
  penguin.graph @main {
  ^bb0(%a: !penguin.tensor<shared_hbm, 128x512xf32>):
    %o = penguin.kernel_node @k(%a) {kind = "external", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 128x512xf32>) -> !penguin.tensor<shared_hbm, 128x512xf32>
    penguin.graph_return %o : !penguin.tensor<shared_hbm, 128x512xf32>
  }
  penguin.kernel @k : (!penguin.tensor<shared_hbm, 128x512xf32>) -> !penguin.tensor<shared_hbm, 128x512xf32> program {
  ^bb0(%a: !penguin.tensor<shared_hbm, 128x512xf32>):
    %out = penguin.alloc "out" : !penguin.tensor<shared_hbm, 128x512xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %y = penguin.alloc "y" : !penguin.tensor<sbuf, 128x512xf32>
    penguin.dma_copy dst %x[0 : [512, 128], [1, 512]], src %a[0 : [512, 128], [1, 512]]
    penguin.activation dst %y[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]] {func = "exp"}
    penguin.dma_copy dst %out[0 : [512, 128], [1, 512]], src %y[0 : [512, 128], [1, 512]]
    penguin.return %out : !penguin.tensor<shared_hbm, 128x512xf32>
  }
}
