// RUN: nkic-opt %s -p dep-reduction | filecheck %s
// RUN: nkic-opt %s -p 'dep-reduction{engine_order=true}' | filecheck %s --check-prefix=ORDER

// 2 -> 0 is implied by 2 -> 1 -> 0 and dropped; the duplicate (flow and anti) edge on 1 stays whole. 3 -> 0 is
// implied only through ACT's program order (3 runs after 1, which waits for 0): dropped with engine_order alone.
// 4 (a DMA) has no engine order: its edge on 0 is implied by 4 -> 2 -> 1 -> 0 either way.
// CHECK: bir.dma_copy {{.*}} {id = 0 : i64, engine = "sp"}
// CHECK-NEXT: bir.activation {{.*}} {id = 1 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.tensor_tensor {{.*}} {id = 2 : i64, engine = "dve", op = "add", deps = [#bir.dep<flow, 1>, #bir.dep<anti, 1>]}
// CHECK-NEXT: bir.activation {{.*}} {id = 3 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.dma_copy {{.*}} {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 2>]}

// ORDER: bir.activation {{.*}} {id = 3 : i64, engine = "act", func = "exp"}
// ORDER-NEXT: bir.dma_copy {{.*}} {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 2>]}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 2048>}
    bir.memloc @c : sbuf [128, 512] float32 {address = array<i64: 0, 4096>}
    bir.memloc @d : sbuf [128, 512] float32 {address = array<i64: 0, 6144>}
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.activation dst @b[0 : [512, 128], [1, 512]], data @a[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
    bir.tensor_tensor dst @c[0 : [512, 128], [1, 512]], data1 @b[0 : [512, 128], [1, 512]], data2 @a[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "dve", op = "add", deps = [#bir.dep<flow, 0>, #bir.dep<flow, 1>, #bir.dep<anti, 1>]}
    bir.activation dst @d[0 : [512, 128], [1, 512]], data @a[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @c[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 0>, #bir.dep<flow, 2>]}
  }
}
