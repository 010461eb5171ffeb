// RUN: nkic-opt %s -p 'insert-semaphores{num_queues=2}' | filecheck %s

// DMAs round-robin over 2 queues and signal their queue's semaphore (8+q); compute signals its engine's.
// A cross-engine edge is a wait on the producer's semaphore count; same-engine and same-queue edges need
// none; a wait already done earlier on the same engine is not repeated.
// CHECK: bir.dma_copy {{.*}} {id = 0 : i64, engine = "sp", queue = 0 : i64, signal = 8 : i64}
// CHECK-NEXT: bir.dma_copy {{.*}} {id = 1 : i64, engine = "sp", queue = 1 : i64, signal = 9 : i64}
// CHECK-NEXT: bir.tensor_tensor {{.*}} {id = 2 : i64, engine = "dve", {{.*}}signal = 2 : i64, waits = array<i64: 8, 1, 9, 1>}
// CHECK-NEXT: bir.tensor_copy {{.*}} {id = 3 : i64, engine = "dve", {{.*}}signal = 2 : i64}
// CHECK-NEXT: bir.activation {{.*}} {id = 4 : i64, engine = "act", {{.*}}signal = 1 : i64, waits = array<i64: 2, 2>}
// CHECK-NEXT: bir.dma_copy {{.*}} {id = 5 : i64, engine = "sp", {{.*}}queue = 0 : i64, signal = 8 : i64, waits = array<i64: 1, 1>}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 2048>}
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @b[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp"}
    bir.tensor_tensor dst @a[0 : [512, 128], [1, 512]], data1 @a[0 : [512, 128], [1, 512]], data2 @b[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "dve", op = "add", deps = [#bir.dep<flow, 0>, #bir.dep<flow, 1>]}
    bir.tensor_copy dst @b[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>, #bir.dep<flow, 1>]}
    bir.activation dst @a[0 : [512, 128], [1, 512]], data @b[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 3>, #bir.dep<anti, 3>]}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "sp", deps = [#bir.dep<flow, 4>]}
  }
}
