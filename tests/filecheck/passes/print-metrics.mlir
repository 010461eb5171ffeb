// RUN: nkic-opt %s -p print-metrics | filecheck %s

// ISA instruction counts per engine and per DMA queue (dve: 2 + the sem_wait of the add's second wait); busy
// time from the shared cost model (only its shape is checked here, the cost model's tests pin the numbers); the
// critical path follows the edges load -> add -> copy -> exp -> store
// (5 instructions; the second load is off it); "simulated" is the simulator's timing-only run of the lowered module
// (the waits and queues are in place); high-water marks are the highest byte per partition a placed tensor
// reaches: @b ends at 2048 + 512*4, the PSUM tile at 1024 + 512*4. The IR is printed unchanged after the report.
// CHECK: print-metrics @f: 6 instructions, 6 dependency edges, 4 semaphore waits
// CHECK-NEXT: track instrs busy ns critical ns
// CHECK-NEXT: act 1 {{[0-9.]+}} {{[0-9.]+}}
// CHECK-NEXT: dve 3 {{[0-9.]+}} {{[0-9.]+}}
// CHECK-NEXT: q0 2 {{[0-9.]+}} {{[0-9.]+}}
// CHECK-NEXT: q1 1 {{[0-9.]+}} 0.0
// CHECK-NEXT: critical path: {{[0-9.]+}} ns over 5 instructions; busiest track {{.*}}; no schedule beats {{[0-9.]+}} ns
// CHECK-NEXT: as scheduled (edges plus each engine{{.}}s and queue{{.}}s program order): {{[0-9.]+}} ns
// CHECK-NEXT: simulated (the runtime{{.}}s timeline on this schedule, as nkic run reports it): {{[0-9.]+}} ns
// CHECK-NEXT: SBUF high-water: 4096 of {{[0-9]+}} bytes per partition ({{[0-9.]+}}%)
// CHECK-NEXT: PSUM high-water: 3072 of 16384 bytes per partition (18.8%)
// CHECK-NEXT: builtin.module {
// CHECK: bir.activation {{.*}} {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 3>], signal = 1 : i64, waits = array<i64: 2, 2>}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 2048>}
    bir.memloc @p : psum [128, 512] float32 {address = array<i64: 0, 1024>}
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp", queue = 0 : i64, signal = 8 : i64}
    bir.dma_copy dst @b[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp", queue = 1 : i64, signal = 9 : i64}
    bir.tensor_tensor dst @a[0 : [512, 128], [1, 512]], data1 @a[0 : [512, 128], [1, 512]], data2 @b[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "dve", op = "add", deps = [#bir.dep<flow, 0>, #bir.dep<flow, 1>], signal = 2 : i64, waits = array<i64: 8, 1, 9, 1>}
    bir.tensor_copy dst @b[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>, #bir.dep<flow, 1>], signal = 2 : i64}
    bir.activation dst @a[0 : [512, 128], [1, 512]], data @b[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 3>], signal = 1 : i64, waits = array<i64: 2, 2>}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "sp", queue = 0 : i64, signal = 8 : i64, waits = array<i64: 1, 1>, deps = [#bir.dep<flow, 4>]}
  }
}
