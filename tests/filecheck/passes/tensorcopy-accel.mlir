// RUN: nkic-opt %s -p tensorcopy-accel | filecheck %s

// The PSUM->SBUF copy 2 (@s <- @p, same dtype, whole tensor) is folded: its reader, the activation, reads @p
// instead, its edge on the copy becomes the copy's own, and @s is gone. Copy 5 stays: its reader is a DMA, which
// cannot read PSUM. Copy 7 stays: it casts (f32 PSUM -> bf16 SBUF), so reading PSUM would change the values.
// CHECK-NOT: bir.memloc @s :
// CHECK: bir.tensor_copy dst @p[{{.*}}], src @a[{{.*}}] {id = 1 : i64
// CHECK-NEXT: bir.activation dst @t[{{.*}}], data @p[{{.*}}] {id = 3 : i64, engine = "unassigned", func = "exp", deps = [#bir.dep<flow, 1>]}
// CHECK: bir.tensor_copy dst @s2[{{.*}}], src @p[{{.*}}] {id = 5 : i64
// CHECK-NEXT: bir.dma_copy dst @out[{{.*}}], src @s2[{{.*}}] {id = 6 : i64
// CHECK-NEXT: bir.tensor_copy dst @h[{{.*}}], src @p[{{.*}}] {id = 7 : i64
// CHECK-NEXT: bir.activation dst @t[{{.*}}], data @h[{{.*}}] {id = 8 : i64

builtin.module {
  bir.function @f attributes {inputs = ["in"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 512] float32 {kind = "output"}
    bir.memloc @a : sbuf [128, 512] float32
    bir.memloc @p : psum [128, 512] float32
    bir.memloc @s : sbuf [128, 512] float32
    bir.memloc @s2 : sbuf [128, 512] float32
    bir.memloc @h : sbuf [128, 512] bfloat16
    bir.memloc @t : sbuf [128, 512] float32
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @in[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    bir.tensor_copy dst @p[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "unassigned", deps = [#bir.dep<flow, 0>]}
    bir.tensor_copy dst @s[0 : [512, 128], [1, 512]], src @p[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "unassigned", deps = [#bir.dep<flow, 1>]}
    bir.activation dst @t[0 : [512, 128], [1, 512]], data @s[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "unassigned", func = "exp", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @t[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
    bir.tensor_copy dst @s2[0 : [512, 128], [1, 512]], src @p[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "unassigned"}
    bir.dma_copy dst @out[0 : [512, 128], [1, 512]], src @s2[0 : [512, 128], [1, 512]] {id = 6 : i64, engine = "sp", deps = [#bir.dep<flow, 5>]}
    bir.tensor_copy dst @h[0 : [512, 128], [1, 512]], src @p[0 : [512, 128], [1, 512]] {id = 7 : i64, engine = "unassigned"}
    bir.activation dst @t[0 : [512, 128], [1, 512]], data @h[0 : [512, 128], [1, 512]] {id = 8 : i64, engine = "unassigned", func = "exp", deps = [#bir.dep<flow, 7>]}
  }
}
