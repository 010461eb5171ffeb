// RUN: nkic-opt %s -p bir-to-isa | filecheck %s

// One isa.core per host function, its HBM variables, one stream per engine in program order; physical
// operands (partition range + byte address on chip, variable + byte offset in HBM); the first wait rides on the
// instruction, a second becomes an isa_act.sem_wait in front of it.
// CHECK: isa.core @sg00 {
// CHECK-NEXT: isa.var @in : input [256, 512] float32 {var_id = 0 : i64}
// CHECK-NEXT: isa.var @out : output [128, 512] float32 {var_id = 1 : i64}
// CHECK-NEXT: isa.stream "act" {
// CHECK-NEXT: isa_act.sem_wait {id = 2 : i64, wait_sem = 8 : i64, wait_value = 1 : i64}
// CHECK-NEXT: isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], bias sbuf(p0, 0x1000, float32)[0 : [1, 128], [1, 1]] {id = 2 : i64, func = "exp", scale = 2.000000e+00 : f32, wait_sem = 3 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}
// CHECK: isa.stream "pool" {
// CHECK-NEXT: isa_pool.iota dst sbuf(p0, 0x1000, float32)[0 : [1, 128], [1, 1]], pattern none(int32)[0 : [1, 128], [0, 1]] {id = 1 : i64, offset = 3 : i64, signal_sem = 3 : i64}
// CHECK: isa.stream "sp" {
// CHECK-NEXT: isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 0, 0x40000, float32)[0 : [512, 128], [1, 512]] {id = 0 : i64, queue = 0 : i64, signal_sem = 8 : i64}
// CHECK-NEXT: isa_sp.dma_copy dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]] {id = 3 : i64, queue = 1 : i64, wait_sem = 1 : i64, wait_value = 1 : i64, signal_sem = 9 : i64}

builtin.module {
  bir.function @main attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [256, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @x : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @y : sbuf [128, 512] float32 {address = array<i64: 0, 2048>}
    bir.memloc @b : sbuf [128, 1] float32 {address = array<i64: 0, 4096>}
    bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @in[65536 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp", queue = 0 : i64, signal = 8 : i64}
    bir.iota dst @b[0 : [1, 128], [1, 1]] {id = 1 : i64, engine = "pool", pattern = #nkic.ap<3 : [0, 1]>, channel_multiplier = 1 : i64, signal = 3 : i64}
    bir.activation dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]], bias @b[0 : [1, 128], [1, 1]] {id = 2 : i64, engine = "act", func = "exp", scale = 2.0 : f32, signal = 1 : i64, waits = array<i64: 3, 1, 8, 1>}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @y[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "sp", queue = 1 : i64, signal = 9 : i64, waits = array<i64: 1, 1>}
  }
}
