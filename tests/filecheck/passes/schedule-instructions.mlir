// RUN: nkic-opt %s -p schedule-instructions | filecheck %s

// Two independent chains (load -> exp -> store) written one after the other: list scheduling issues the second
// load before the first exp so the DMA overlaps ACT, and renumbers ids (edges follow) in the new order.
// CHECK: bir.dma_copy dst @a{{.*}} {id = 0 : i64
// CHECK-NEXT: bir.dma_copy dst @b{{.*}} {id = 1 : i64
// CHECK-NEXT: bir.activation dst @a{{.*}} {id = 2 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.dma_copy dst @out[0 : {{.*}} {id = 3 : i64, engine = "sp", deps = [#bir.dep<flow, 2>]}
// CHECK-NEXT: bir.activation dst @b{{.*}} {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 1>]}
// CHECK-NEXT: bir.dma_copy dst @out[65536 : {{.*}} {id = 5 : i64, engine = "sp", deps = [#bir.dep<flow, 4>]}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [256, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [256, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 2048>}
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.activation dst @a[0 : [512, 128], [1, 512]], data @a[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp", deps = [#bir.dep<flow, 1>]}
    bir.dma_copy dst @b[0 : [512, 128], [1, 512]], src @in[65536 : [512, 128], [1, 512]] {id = 3 : i64, engine = "sp"}
    bir.activation dst @b[0 : [512, 128], [1, 512]], data @b[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 3>]}
    bir.dma_copy dst @out[65536 : [512, 128], [1, 512]], src @b[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "sp", deps = [#bir.dep<flow, 4>]}
  }
}
