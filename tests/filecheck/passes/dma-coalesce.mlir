// RUN: nkic-opt %s -p 'dma-optimization{num_queues=1}' --split-input-file | filecheck %s
// RUN: nkic-opt %s -p 'dma-optimization{num_queues=1 coalesce=false}' --split-input-file | filecheck %s --check-prefix=OFF
// RUN: nkic-opt %s -p 'dma-optimization{num_queues=4}' --split-input-file | filecheck %s --check-prefix=FOUR

// Three loads of 128-row tiles of @in into slots k = 0, 1, 2 of @b (the tutorial's per-K-tile loads): the sources
// are 128 rows (65536 elements) apart, the destinations 512 elements; they become one transfer with a dimension
// of 3 after the partition/row one. The activation that read slot 1 now waits for the merged transfer (id 0), ids
// are renumbered. @c's load has a different destination tensor and stays on its own.
// With one queue the three transfers would pay the fixed start one after another: merged, the replay finishes
// earlier. With four queues they run side by side, and the merged one would finish later: the replay guard keeps
// them apart (FOUR).
// CHECK: bir.dma_copy dst @b[0 : [1536, 128], [512, 3], [1, 512]], src @in[0 : [512, 128], [65536, 3], [1, 512]] {id = 0 : i64, engine = "sp", queue = {{[0-9]}} : i64}
// CHECK-NEXT: bir.dma_copy dst @c{{.*}} {id = 1 : i64
// CHECK-NEXT: bir.activation dst @c{{.*}}, data @b[512 : [1536, 128], [1, 512]] {id = 2 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
// CHECK-NEXT: }
// OFF-COUNT-4: bir.dma_copy
// FOUR-COUNT-4: bir.dma_copy

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = []} {
    bir.memloc @in : shared_hbm [384, 512] float32 {kind = "input"}
    bir.memloc @b : sbuf [128, 1536] float32 {address = array<i64: 0, 0>}
    bir.memloc @c : sbuf [128, 512] float32 {address = array<i64: 0, 8192>}
    bir.dma_copy dst @b[0 : [1536, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @c[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "sp"}
    bir.dma_copy dst @b[512 : [1536, 128], [1, 512]], src @in[65536 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp"}
    bir.dma_copy dst @b[1024 : [1536, 128], [1, 512]], src @in[131072 : [512, 128], [1, 512]] {id = 3 : i64, engine = "sp"}
    bir.activation dst @c[0 : [512, 128], [1, 512]], data @b[512 : [1536, 128], [1, 512]] {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 2>, #bir.dep<output, 1>]}
  }
}

// -----

// An intervening dependence: the second load into @b overwrites what the activation (id 1) reads, so it depends
// on it and cannot be done at the first load's place; both transfers stay.
// CHECK: bir.dma_copy dst @b[0 :{{.*}} {id = 0 : i64
// CHECK-NEXT: bir.activation {{.*}} {id = 1 : i64
// CHECK-NEXT: bir.dma_copy dst @b[512 :{{.*}} {id = 2 : i64, engine = "sp", deps = [#bir.dep<anti, 1>]

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = []} {
    bir.memloc @in : shared_hbm [256, 512] float32 {kind = "input"}
    bir.memloc @b : sbuf [128, 1024] float32 {address = array<i64: 0, 0>}
    bir.memloc @c : sbuf [128, 1024] float32 {address = array<i64: 0, 8192>}
    bir.dma_copy dst @b[0 : [1024, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.activation dst @c[0 : [1024, 128], [1, 1024]], data @b[0 : [1024, 128], [1, 1024]] {id = 1 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
    bir.dma_copy dst @b[512 : [1024, 128], [1, 512]], src @in[65536 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp", deps = [#bir.dep<anti, 1>]}
  }
}

// -----

// Patterns that already have four free dimensions: the merged transfer would need a fifth, more than an ISA operand
// encodes, so the two loads stay apart (with one queue they would merge otherwise).
// CHECK: bir.dma_copy dst @b[0 : [1536, 128], [256, 2], [64, 4], [16, 4], [1, 16]]{{.*}} {id = 0 : i64
// CHECK-NEXT: bir.dma_copy dst @b[512 : [1536, 128], [256, 2], [64, 4], [16, 4], [1, 16]]{{.*}} {id = 1 : i64

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = []} {
    bir.memloc @in : shared_hbm [384, 512] float32 {kind = "input"}
    bir.memloc @b : sbuf [128, 1536] float32 {address = array<i64: 0, 0>}
    bir.dma_copy dst @b[0 : [1536, 128], [256, 2], [64, 4], [16, 4], [1, 16]], src @in[0 : [512, 128], [256, 2], [64, 4], [16, 4], [1, 16]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @b[512 : [1536, 128], [256, 2], [64, 4], [16, 4], [1, 16]], src @in[65536 : [512, 128], [256, 2], [64, 4], [16, 4], [1, 16]] {id = 1 : i64, engine = "sp"}
  }
}
