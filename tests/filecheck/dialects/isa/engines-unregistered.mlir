// RUN: not nkic-opt %s 2>&1 | filecheck %s

// A pair no generation allows has no ISA op at all: nisa.memset runs "using Vector or GpSimd Engine", so there is
// no isa_act.memset (target/instructions.py derives each opcode's engines from the instructions lowering to it).
builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.memset dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 16]] {id = 0 : i64, value = 0.0 : f32}
    }
  }
}
// CHECK: Operation isa_act.memset is not registered
