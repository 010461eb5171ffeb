// RUN: nkic-opt %s -p bir-unroll | filecheck %s

// Each iteration folds i0 (and i1) into the offsets; memlocs scoped to a loop get one copy per iteration
// (the inner-scoped @t once per inner *and* outer iteration); ids are renumbered in program order.
// CHECK: bir.memloc @acc.0 : sbuf [128, 512] float32
// CHECK-NEXT: bir.memloc @acc.1 : sbuf [128, 512] float32
// CHECK-DAG: bir.memloc @t.0.0 : sbuf [128, 512] float32
// CHECK-DAG: bir.memloc @t.1.1 : sbuf [128, 512] float32
// CHECK-NOT: bir.loop
// CHECK: bir.dma_copy dst @t.0.0[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
// CHECK-NEXT: bir.tensor_tensor dst @acc.0[0 : [512, 128], [1, 512]], data1 @acc.0[0 : [512, 128], [1, 512]], data2 @t.0.0[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve", op = "add"}
// CHECK-NEXT: bir.dma_copy dst @t.1.0[0 : [512, 128], [1, 512]], src @a[512 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp"}
// CHECK: bir.dma_copy dst @t.0.1[0 : [512, 128], [1, 512]], src @a[131072 : [512, 128], [1, 512]] {id = 4 : i64, engine = "sp"}
// CHECK: bir.dma_copy dst @t.1.1[0 : [512, 128], [1, 512]], src @a[131584 : [512, 128], [1, 512]] {id = 6 : i64, engine = "sp"}
// CHECK-NEXT: bir.tensor_tensor dst @acc.1[0 : [512, 128], [1, 512]], data1 @acc.1[0 : [512, 128], [1, 512]], data2 @t.1.1[0 : [512, 128], [1, 512]] {id = 7 : i64, engine = "dve", op = "add"}

builtin.module {
  bir.function @f attributes {inputs = ["a"], outputs = []} {
    bir.memloc @a : shared_hbm [256, 1024] float32 {kind = "input"}
    bir.memloc @acc : sbuf [128, 512] float32 {scope = "L0"}
    bir.memloc @t : sbuf [128, 512] float32 {scope = "L1"}
    bir.loop "L0" "affine" 0 to 2 step 1 {
      bir.loop "L1" "affine" 0 to 2 step 1 {
        bir.dma_copy dst @t[0 : [512, 128], [1, 512]], src @a[0 + 131072*i0 + 512*i1 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
        bir.tensor_tensor dst @acc[0 : [512, 128], [1, 512]], data1 @acc[0 : [512, 128], [1, 512]], data2 @t[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve", op = "add", deps = [#bir.dep<flow, 0>]}
      }
    }
  }
}
