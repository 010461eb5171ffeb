// RUN: nkic-opt %s -p 'dma-optimization{num_queues=2}' | filecheck %s

// A long load (2 MiB, id 0) and three short ones. Round-robin would put id 2 behind the long one on queue 0; by
// load, ids 1, 2 and 3 all go to queue 1, which frees up long before queue 0 does.
// CHECK: bir.dma_copy dst @a{{.*}} {id = 0 : i64, engine = "sp", queue = 0 : i64}
// CHECK-NEXT: bir.dma_copy dst @b{{.*}} {id = 1 : i64, engine = "sp", queue = 1 : i64}
// CHECK-NEXT: bir.dma_copy dst @c{{.*}} {id = 2 : i64, engine = "sp", queue = 1 : i64}
// CHECK-NEXT: bir.dma_copy dst @d{{.*}} {id = 3 : i64, engine = "sp", queue = 1 : i64}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = []} {
    bir.memloc @in : shared_hbm [128, 4096] float32 {kind = "input"}
    bir.memloc @a : sbuf [128, 4096] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 64] float32 {address = array<i64: 0, 16384>}
    bir.memloc @c : sbuf [128, 64] float32 {address = array<i64: 0, 16640>}
    bir.memloc @d : sbuf [128, 64] float32 {address = array<i64: 0, 16896>}
    bir.dma_copy dst @a[0 : [4096, 128], [1, 4096]], src @in[0 : [4096, 128], [1, 4096]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @b[0 : [64, 128], [1, 64]], src @in[0 : [4096, 128], [1, 64]] {id = 1 : i64, engine = "sp"}
    bir.dma_copy dst @c[0 : [64, 128], [1, 64]], src @in[64 : [4096, 128], [1, 64]] {id = 2 : i64, engine = "sp"}
    bir.dma_copy dst @d[0 : [64, 128], [1, 64]], src @in[128 : [4096, 128], [1, 64]] {id = 3 : i64, engine = "sp"}
  }
}
