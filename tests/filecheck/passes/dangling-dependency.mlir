// RUN: not nkic-opt %s -p schedule-instructions 2>&1 | filecheck %s --check-prefix=SCHED
// RUN: not nkic-opt %s -p insert-semaphores 2>&1 | filecheck %s --check-prefix=SEM

// A dependency on an instruction id that does not exist (or is not earlier) is a diagnostic in both passes that
// follow dependency edges, never a KeyError.
// SCHED: nkic-opt: error: @main: a dependency on instruction 77, which is not before it in the same barrier-free stretch
// SCHED-NOT: Traceback
// SEM: nkic-opt: error: instruction 1 depends on 77, which is not before it in the same barrier-free stretch
// SEM-NOT: Traceback
builtin.module {
  bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @x : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp", deps = [#bir.dep<flow, 77>]}
  }
}
