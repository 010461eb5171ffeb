// RUN: nkic-opt %s -p "spill{budget=1536}" --split-input-file | filecheck %s

// Three 512-byte tiles loaded before any is used, and the result @y: with room for three, where @y starts all four
// are live; @a's next use is the furthest, so @a is stored to its HBM scratch right after its load and reloaded into
// @a.r1 right before its use, which (and every later use) now names the reload. Nothing else moves.
// CHECK:      bir.memloc @a.spill : hbm [128, 128] float32
// CHECK:      bir.memloc @a.r1 : sbuf [128, 128] float32 {loc = "k.py:3"}
// CHECK-NOT:  .spill
// CHECK:      bir.dma_copy dst @a[0 : [128, 128], [1, 128]], src @x
// CHECK-NEXT: bir.dma_copy dst @a.spill[0 : [128, 128], [1, 128]], src @a[0 : [128, 128], [1, 128]] {id = 6 : i64, engine = "sp", call = "spill", loc = "k.py:5"}
// CHECK-NEXT: bir.dma_copy dst @b
// CHECK-NEXT: bir.dma_copy dst @c
// CHECK-NEXT: bir.tensor_copy dst @y[0 : [128, 128], [1, 128]], src @c
// CHECK-NEXT: bir.tensor_copy dst @y[0 : [128, 128], [1, 128]], src @b
// CHECK-NEXT: bir.dma_copy dst @a.r1[0 : [128, 128], [1, 128]], src @a.spill[0 : [128, 128], [1, 128]] {id = 7 : i64, engine = "sp", call = "spill", loc = "k.py:9"}
// CHECK-NEXT: bir.tensor_copy dst @y[0 : [128, 128], [1, 128]], src @a.r1

builtin.module {
  bir.function @f attributes {inputs = ["x"], outputs = []} {
    bir.memloc @x : hbm [128, 128] float32 {kind = "input"}
    bir.memloc @y : sbuf [128, 128] float32
    bir.memloc @a : sbuf [128, 128] float32 {loc = "k.py:3"}
    bir.memloc @b : sbuf [128, 128] float32
    bir.memloc @c : sbuf [128, 128] float32
    bir.dma_copy dst @a[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {loc = "k.py:5", id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @b[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 1 : i64, engine = "sp"}
    bir.dma_copy dst @c[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 2 : i64, engine = "sp"}
    bir.tensor_copy dst @y[0 : [128, 128], [1, 128]], src @c[0 : [128, 128], [1, 128]] {id = 3 : i64, engine = "dve"}
    bir.tensor_copy dst @y[0 : [128, 128], [1, 128]], src @b[0 : [128, 128], [1, 128]] {id = 4 : i64, engine = "dve"}
    bir.tensor_copy dst @y[0 : [128, 128], [1, 128]], src @a[0 : [128, 128], [1, 128]] {loc = "k.py:9", id = 5 : i64, engine = "dve"}
  }
}

// -----

// A tensor the over-full instruction uses is never evicted there, nor is an explicitly placed one, nor a PSUM tile:
// two 1 KiB tiles are live where there is room for 1.5, but every instruction uses @a or @fixed keeps its place.
// CHECK:     builtin.module
// CHECK-NOT: .spill
// CHECK-NOT: call = "spill"

builtin.module {
  bir.function @f attributes {inputs = ["x"], outputs = []} {
    bir.memloc @x : hbm [128, 256] float32 {kind = "input"}
    bir.memloc @a : sbuf [128, 256] float32
    bir.memloc @fixed : sbuf [128, 256] float32 {address = array<i64: 0, 4096>}
    bir.memloc @p : psum [128, 256] float32
    bir.dma_copy dst @fixed[0 : [256, 128], [1, 256]], src @x[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.tensor_copy dst @a[0 : [256, 128], [1, 256]], src @fixed[0 : [256, 128], [1, 256]] {id = 1 : i64, engine = "dve"}
    bir.tensor_tensor dst @p[0 : [256, 128], [1, 256]], data1 @a[0 : [256, 128], [1, 256]], data2 @fixed[0 : [256, 128], [1, 256]] {op = "add", id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @a[0 : [256, 128], [1, 256]], src @p[0 : [256, 128], [1, 256]] {id = 3 : i64, engine = "dve"}
  }
}

// -----

// A clean spill: with room for three tiles, loading @d pushes @a out (stored, reloaded as @a.r1 before its read);
// loading @f pushes @a.r1 out, which no instruction wrote since its reload: the scratch still holds it, so that
// spill is a reload alone.
// CHECK:      builtin.module
// CHECK:      bir.dma_copy dst @a.spill[0 : [128, 128], [1, 128]], src @a[0 : [128, 128], [1, 128]]
// CHECK-NOT:  dst @a.spill
// CHECK:      bir.dma_copy dst @a.r1[0 : [128, 128], [1, 128]], src @a.spill
// CHECK-NEXT: bir.tensor_copy dst @b[0 : [128, 128], [1, 128]], src @a.r1
// CHECK-NOT:  dst @a.spill
// CHECK:      bir.dma_copy dst @a.r2[0 : [128, 128], [1, 128]], src @a.spill
// CHECK-NEXT: bir.tensor_copy dst @b[0 : [128, 128], [1, 128]], src @a.r2

builtin.module {
  bir.function @f attributes {inputs = ["x"], outputs = []} {
    bir.memloc @x : hbm [128, 128] float32 {kind = "input"}
    bir.memloc @a : sbuf [128, 128] float32
    bir.memloc @b : sbuf [128, 128] float32
    bir.memloc @c : sbuf [128, 128] float32
    bir.memloc @d : sbuf [128, 128] float32
    bir.memloc @e : sbuf [128, 128] float32
    bir.memloc @f : sbuf [128, 128] float32
    bir.dma_copy dst @a[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 0 : i64, engine = "sp"}
    bir.dma_copy dst @b[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 1 : i64, engine = "sp"}
    bir.dma_copy dst @c[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 2 : i64, engine = "sp"}
    bir.dma_copy dst @d[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 3 : i64, engine = "sp"}
    bir.tensor_tensor dst @b[0 : [128, 128], [1, 128]], data1 @c[0 : [128, 128], [1, 128]], data2 @d[0 : [128, 128], [1, 128]] {op = "add", id = 4 : i64, engine = "dve"}
    bir.tensor_copy dst @b[0 : [128, 128], [1, 128]], src @a[0 : [128, 128], [1, 128]] {id = 5 : i64, engine = "dve"}
    bir.dma_copy dst @e[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 6 : i64, engine = "sp"}
    bir.dma_copy dst @f[0 : [128, 128], [1, 128]], src @x[0 : [128, 128], [1, 128]] {id = 7 : i64, engine = "sp"}
    bir.tensor_tensor dst @b[0 : [128, 128], [1, 128]], data1 @e[0 : [128, 128], [1, 128]], data2 @f[0 : [128, 128], [1, 128]] {op = "add", id = 8 : i64, engine = "dve"}
    bir.tensor_copy dst @b[0 : [128, 128], [1, 128]], src @a[0 : [128, 128], [1, 128]] {id = 9 : i64, engine = "dve"}
  }
}
