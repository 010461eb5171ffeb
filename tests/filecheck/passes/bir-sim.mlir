// RUN: nkic-opt %s -p bir-sim | filecheck %s
// RUN: sed -e 's/, waits = array<i64: 2, 2>//' %s | not nkic-opt -p bir-sim 2>&1 | filecheck %s --check-prefix=RACE

// Program order and the concurrent simulation agree, and the IR is printed unchanged.
// CHECK: bir-sim: 6 instructions in program order agree bit for bit with the concurrent simulation on 1 output(s) (seed 0)
// CHECK-NEXT: builtin.module {
// CHECK: bir.activation {{.*}} waits = array<i64: 2, 2>}

// Without its wait on DVE, the activation reads @b before the copy writes it: the outputs differ.
// RACE: bir-sim: output 'out' differs between program order and the concurrent simulation, element (0, 0)

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 2048>}
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp", queue = 0 : i64, signal = 8 : i64}
    bir.dma_copy dst @b[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp", queue = 1 : i64, signal = 9 : i64}
    bir.tensor_tensor dst @a[0 : [512, 128], [1, 512]], data1 @a[0 : [512, 128], [1, 512]], data2 @b[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "dve", op = "add", deps = [#bir.dep<flow, 0>, #bir.dep<flow, 1>], signal = 2 : i64, waits = array<i64: 8, 1, 9, 1>}
    bir.tensor_copy dst @b[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>, #bir.dep<anti, 1>], signal = 2 : i64}
    bir.activation dst @a[0 : [512, 128], [1, 512]], data @b[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 3>], signal = 1 : i64, waits = array<i64: 2, 2>}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "sp", queue = 0 : i64, signal = 8 : i64, waits = array<i64: 1, 1>, deps = [#bir.dep<flow, 4>]}
  }
}
