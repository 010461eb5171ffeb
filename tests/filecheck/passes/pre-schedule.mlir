// RUN: nkic-opt %s -p pre-schedule | filecheck %s

// Before allocation: two independent chains (load -> exp -> store) written one after the other are interleaved
// (the second load goes before the first exp), and the tensors stay unplaced with no edges left behind, for
// allocate-memory and dependency-analysis to do in the new order.
// CHECK: bir.memloc @a : sbuf [128, 512] float32
// CHECK-NEXT: bir.memloc @b : sbuf [128, 512] float32
// CHECK-NEXT: bir.dma_copy dst @a{{.*}} {id = 0 : i64, engine = "sp"}
// CHECK-NEXT: bir.dma_copy dst @b{{.*}} {id = 1 : i64, engine = "sp"}
// CHECK-NEXT: bir.activation dst @a{{.*}} {id = 2 : i64, engine = "act", func = "exp"}
// CHECK-NEXT: bir.dma_copy dst @out[0 : {{.*}} {id = 3 : i64, engine = "sp"}
// CHECK-NEXT: bir.activation dst @b{{.*}} {id = 4 : i64, engine = "act", func = "exp"}
// CHECK-NEXT: bir.dma_copy dst @out[65536 : {{.*}} {id = 5 : i64, engine = "sp"}

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [256, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [256, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32
    bir.memloc @b : sbuf [128, 512] float32
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.activation dst @a[0 : [512, 128], [1, 512]], data @a[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "act", func = "exp"}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp"}
    bir.dma_copy dst @b[0 : [512, 128], [1, 512]], src @in[65536 : [512, 128], [1, 512]] {id = 3 : i64, engine = "sp"}
    bir.activation dst @b[0 : [512, 128], [1, 512]], data @b[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "act", func = "exp"}
    bir.dma_copy dst @out[65536 : [512, 128], [1, 512]], src @b[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "sp"}
  }
}
