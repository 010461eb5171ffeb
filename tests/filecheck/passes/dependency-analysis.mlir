// RUN: nkic-opt %s -p dependency-analysis | filecheck %s

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
