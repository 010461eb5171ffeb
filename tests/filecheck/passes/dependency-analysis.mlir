// RUN: nkic-opt %s --split-input-file -p dependency-analysis | filecheck %s

// Edges come from physical bytes: @b reuses @a's address, so writing @b waits for the last reader of @a
// (anti) although the names differ; the disjoint @c gets no edge; a write after a write is an output edge.
// CHECK: bir.dma_copy dst @a{{.*}} {id = 0 : i64, engine = "sp"}
// CHECK-NEXT: bir.tensor_copy dst @c{{.*}} {id = 1 : i64, engine = "dve", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.memset dst @b{{.*}} {id = 2 : i64, engine = "pool", {{.*}}deps = [#bir.dep<output, 0>, #bir.dep<anti, 1>]}
// CHECK-NEXT: bir.dma_copy dst @out{{.*}} {id = 3 : i64, engine = "sp", deps = [#bir.dep<flow, 2>]}
// CHECK-NEXT: bir.dma_copy dst @out{{.*}} {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 1>, #bir.dep<output, 3>]}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @c : sbuf [128, 512] float32 {address = array<i64: 0, 4096>}
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.tensor_copy dst @c[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve"}
    bir.memset dst @b[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "pool", value = 1.0 : f32}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @b[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "sp"}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @c[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "sp"}
  }
}

// -----

// The VectorE accumulator registers are state: continuing an accumulation (reduce) depends on the write before it
// (flow), even through disjoint memory; a later reset_reduce waits for that reader (anti); two writes with no reader
// between them stay unordered.
// CHECK: bir.exponential dst @x{{.*}} {id = 0 : i64, engine = "dve", reduce_cmd = "reset_reduce"}
// CHECK-NEXT: bir.exponential dst @y{{.*}} {id = 1 : i64, engine = "dve", reduce_cmd = "reduce", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.exponential dst @z{{.*}} {id = 2 : i64, engine = "dve", reduce_cmd = "reset_reduce", deps = [#bir.dep<anti, 1>]}
// CHECK-NEXT: bir.exponential dst @w{{.*}} {id = 3 : i64, engine = "dve", reduce_cmd = "reset_reduce"}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 64] float32 {address = array<i64: 0, 0>}
    bir.memloc @y : sbuf [128, 64] float32 {address = array<i64: 0, 256>}
    bir.memloc @z : sbuf [128, 64] float32 {address = array<i64: 0, 512>}
    bir.memloc @w : sbuf [128, 64] float32 {address = array<i64: 0, 768>}
    bir.memloc @s : sbuf [128, 1] float32 {address = array<i64: 0, 1024>}
    bir.exponential dst @x[0 : [64, 128], [1, 64]], src @x[0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "dve", reduce_cmd = "reset_reduce"}
    bir.exponential dst @y[0 : [64, 128], [1, 64]], src @y[0 : [64, 128], [1, 64]], reduce_res @s[0 : [1, 128], [1, 1]] {id = 1 : i64, engine = "dve", reduce_cmd = "reduce"}
    bir.exponential dst @z[0 : [64, 128], [1, 64]], src @z[0 : [64, 128], [1, 64]] {id = 2 : i64, engine = "dve", reduce_cmd = "reset_reduce"}
    bir.exponential dst @w[0 : [64, 128], [1, 64]], src @w[0 : [64, 128], [1, 64]] {id = 3 : i64, engine = "dve", reduce_cmd = "reset_reduce"}
  }
}

// -----

// A control instruction (here a runtime loop's loop_begin/loop_end) is a barrier: it gets no edges and none cross it,
// so the copy after loop_begin has no flow edge on the memset before it although it reads what the memset wrote.
// CHECK: bir.memset dst @a{{.*}} {id = 0 : i64, engine = "pool", value = 1.000000e+00 : f32}
// CHECK-NEXT: bir.loop_begin {id = 1 : i64, engine = "sp", cond_reg = 1 : i64}
// CHECK-NEXT: bir.tensor_copy dst @b{{.*}}, src @a{{.*}} {id = 2 : i64, engine = "dve"}
// CHECK-NEXT: bir.tensor_copy dst @a{{.*}}, src @b{{.*}} {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
// CHECK-NEXT: bir.loop_end {id = 4 : i64, engine = "sp", cond_reg = 1 : i64}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 64] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 64] float32 {address = array<i64: 0, 256>}
    bir.memset dst @a[0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "pool", value = 1.0 : f32}
    bir.loop_begin {id = 1 : i64, engine = "sp", cond_reg = 1 : i64}
    bir.tensor_copy dst @b[0 : [64, 128], [1, 64]], src @a[0 : [64, 128], [1, 64]] {id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @a[0 : [64, 128], [1, 64]], src @b[0 : [64, 128], [1, 64]] {id = 3 : i64, engine = "dve"}
    bir.loop_end {id = 4 : i64, engine = "sp", cond_reg = 1 : i64}
  }
}

// -----

// The PRNG state of an engine is state too (the declarations' reads_state/writes_state), per engine: two seeds stay
// unordered until a draw reads the state, which then depends on the last seed (flow) and orders that seed after the
// first (output), so the first cannot slip between them; GpSimd's generators are apart from VectorE's; a new state
// waits for the draws and reads since (anti).
// CHECK: bir.set_rng_seed src_seeds @s{{.*}} {id = 0 : i64, engine = "dve"}
// CHECK-NEXT: bir.set_rng_seed src_seeds @t{{.*}} {id = 1 : i64, engine = "dve", deps = [#bir.dep<output, 0>]}
// CHECK-NEXT: bir.rng dst @x{{.*}} {id = 2 : i64, engine = "dve", deps = [#bir.dep<flow, 1>]}
// CHECK-NEXT: bir.rng dst @y{{.*}} {id = 3 : i64, engine = "pool"}
// CHECK-NEXT: bir.rand_get_state dst @g{{.*}} {id = 4 : i64, engine = "pool", deps = [#bir.dep<flow, 3>]}
// CHECK-NEXT: bir.rand_set_state src_seeds @h{{.*}} {id = 5 : i64, engine = "pool", deps = [#bir.dep<anti, 3>, #bir.dep<anti, 4>]}
// CHECK-NEXT: bir.rng dst @z{{.*}} {id = 6 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @s : sbuf [1, 1] int32 {address = array<i64: 0, 0>}
    bir.memloc @t : sbuf [1, 1] int32 {address = array<i64: 0, 64>}
    bir.memloc @x : sbuf [128, 16] uint32 {address = array<i64: 0, 128>}
    bir.memloc @y : sbuf [128, 16] uint32 {address = array<i64: 0, 192>}
    bir.memloc @z : sbuf [128, 16] uint32 {address = array<i64: 0, 256>}
    bir.memloc @g : sbuf [128, 6] uint32 {address = array<i64: 0, 320>}
    bir.memloc @h : sbuf [128, 6] uint32 {address = array<i64: 0, 384>}
    bir.set_rng_seed src_seeds @s[0 : [1, 1], [1, 1]] {id = 0 : i64, engine = "dve"}
    bir.set_rng_seed src_seeds @t[0 : [1, 1], [1, 1]] {id = 1 : i64, engine = "dve"}
    bir.rng dst @x[0 : [16, 128], [1, 16]] {id = 2 : i64, engine = "dve"}
    bir.rng dst @y[0 : [16, 128], [1, 16]] {id = 3 : i64, engine = "pool"}
    bir.rand_get_state dst @g[0 : [6, 128], [1, 6]] {id = 4 : i64, engine = "pool"}
    bir.rand_set_state src_seeds @h[0 : [6, 128], [1, 6]] {id = 5 : i64, engine = "pool"}
    bir.rng dst @z[0 : [16, 128], [1, 16]] {id = 6 : i64, engine = "dve"}
  }
}

// -----

// The LNC=2 pair: a core's sendrecvs stay in program order whatever engines run them (the simulator pairs the
// cores' k-th sendrecvs of a pipe), through the core-wide lnc_pipes state: the second depends on the first although
// their tiles are disjoint. core_barrier is a control instruction: no edges, and the tables restart after it.
// CHECK: bir.sendrecv dst @a{{.*}} {id = 0 : i64, engine = "sp", send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 0 : i64}
// CHECK-NEXT: bir.sendrecv dst @c{{.*}} {id = 1 : i64, engine = "pool", send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 3 : i64, deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.core_barrier data @out{{.*}} {id = 2 : i64, engine = "pool", cores = array<i64: 0, 1>}
// CHECK-NEXT: bir.tensor_copy dst @c{{.*}} {id = 3 : i64, engine = "dve"}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = ["out"]} {
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @c : sbuf [128, 512] float32 {address = array<i64: 0, 4096>}
    bir.sendrecv dst @a[0 : [512, 128], [1, 256]], src @a[256 : [512, 128], [1, 256]] {id = 0 : i64, engine = "sp", send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 0 : i64}
    bir.sendrecv dst @c[0 : [512, 128], [1, 256]], src @c[256 : [512, 128], [1, 256]] {id = 1 : i64, engine = "pool", send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 3 : i64}
    bir.core_barrier data @out[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "pool", cores = array<i64: 0, 1>}
    bir.tensor_copy dst @c[0 : [512, 128], [1, 256]], src @a[0 : [512, 128], [1, 256]] {id = 3 : i64, engine = "dve"}
  }
}

// -----

// Explicit edges (nisa.NkiInstruction.depends_on): an instruction listing a tag in `after` gets an `ordered` edge on
// the latest earlier instruction carrying it (here the second, unrolled copy tagged "i3"), although no data links
// them; a tag whose carrier is before a control instruction adds nothing (the barrier orders them already).
// CHECK: bir.activation dst @x{{.*}} {id = 0 : i64, engine = "act", {{.*}}tag = "i3"}
// CHECK-NEXT: bir.activation dst @y{{.*}} {id = 1 : i64, engine = "act", {{.*}}tag = "i3"}
// CHECK-NEXT: bir.memset dst @z{{.*}} {id = 2 : i64, engine = "dve", {{.*}}after = ["i3"], deps = [#bir.dep<ordered, 1>]}
// CHECK-NEXT: bir.loop_begin
// CHECK-NEXT: bir.memset dst @w{{.*}} {id = 4 : i64, engine = "dve", value = 0.000000e+00 : f32, after = ["i3"]}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 64] float32 {address = array<i64: 0, 0>}
    bir.memloc @y : sbuf [128, 64] float32 {address = array<i64: 0, 256>}
    bir.memloc @z : sbuf [128, 64] float32 {address = array<i64: 0, 512>}
    bir.memloc @w : sbuf [128, 64] float32 {address = array<i64: 0, 768>}
    bir.activation dst @x[0 : [64, 128], [1, 64]], data @x[0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "act", func = "exp", tag = "i3"}
    bir.activation dst @y[0 : [64, 128], [1, 64]], data @y[0 : [64, 128], [1, 64]] {id = 1 : i64, engine = "act", func = "exp", tag = "i3"}
    bir.memset dst @z[0 : [64, 128], [1, 64]] {id = 2 : i64, engine = "dve", value = 0.0 : f32, after = ["i3"]}
    bir.loop_begin {id = 3 : i64, engine = "sp", cond_reg = 1 : i64}
    bir.memset dst @w[0 : [64, 128], [1, 64]] {id = 4 : i64, engine = "dve", value = 0.0 : f32, after = ["i3"]}
    bir.loop_end {id = 5 : i64, engine = "sp", cond_reg = 1 : i64}
  }
}
