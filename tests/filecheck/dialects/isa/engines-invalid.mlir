// RUN: nkic-opt %s --generation gen2 -p isa-verify --split-input-file --verify-diagnostics | filecheck %s
// RUN: nkic-opt %s --generation gen4 -p isa-verify --split-input-file | filecheck %s --check-prefix=GEN4

// An (engine, opcode) pair the NKI ISA reference excludes on the target's generation is refused by isa-verify
// (the ISA ops' verifiers know no generation: they accept an engine some generation allows).

// nisa.tensor_copy: "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine."
builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.tensor_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 16]], src sbuf(p0, 0x80, float32)[0 : [1, 128], [1, 16]] {id = 0 : i64}
    }
  }
}
// CHECK: @sg00: instruction 0 (TENSOR_COPY) cannot run on act on NeuronCore-v2: nisa.tensor_copy runs on act only from NeuronCore-v3, not on NeuronCore-v2
// GEN4: isa_act.tensor_copy

// -----

// nisa.rng: "Supported engines: NeuronCore-v2: Vector. NeuronCore-v3+: GpSimd, Vector."
builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.rng dst sbuf(p0, 0x0, uint32)[0 : [1, 128], [1, 16]] {id = 0 : i64}
    }
  }
}
// CHECK: @sg00: instruction 0 (RNG) cannot run on pool on NeuronCore-v2: nisa.rng runs on pool only from NeuronCore-v3, not on NeuronCore-v2
// GEN4: isa_pool.rng
