// RUN: nkic-opt %s -p rotate-blocks --split-input-file | filecheck %s

// A block tensor [P, B, F] whose blocks a rolled loop writes and reads one per iteration (+ 64*r1: one block of 64
// elements per step) gets one rotating buffer: the body's accesses move to @t.rot, one block, the register term
// dropped; @t, used nowhere else, is gone.
// CHECK:      bir.memloc @t.rot : sbuf [128, 1, 64] float32 {loc = "k.py:3"}
// CHECK-NOT:  bir.memloc @t :
// CHECK:      bir.counted_loop_begin
// CHECK-NEXT: bir.dma_copy dst @t.rot[0 : [64, 128], [1, 64]], src @a[0 : [64, 128], [1, 64] + 8192*r1]
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t.rot[0 : [64, 128], [1, 64]]
// CHECK-NEXT: bir.counted_loop_end

builtin.module {
  bir.function @f attributes {inputs = ["a"], outputs = []} {
    bir.memloc @a : shared_hbm [4, 128, 64] float32 {kind = "input"}
    bir.memloc @x : sbuf [128, 64] float32
    bir.memloc @t : sbuf [128, 4, 64] float32 {loc = "k.py:3"}
    bir.counted_loop_begin {id = 0 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 4 : i64}
    bir.dma_copy dst @t[0 : [256, 128], [1, 64] + 64*r1], src @a[0 : [64, 128], [1, 64] + 8192*r1] {id = 1 : i64, engine = "sp"}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[0 : [256, 128], [1, 64] + 64*r1] {id = 2 : i64, engine = "dve"}
    bir.counted_loop_end {id = 3 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 1 : i64, bound = 4 : i64}
  }
}

// -----

// Interleaved by two (the counter steps 2, each copy of the body at its own block) after one leftover iteration
// emitted before the loop: two rotating buffers, copy u in slot u; the leftover iteration's block 0 stays in @t
// (split-blocks places it), which the loop never touches.
// CHECK:      bir.memloc @t.rot : sbuf [128, 2, 64] float32
// CHECK-NEXT: bir.memloc @t : sbuf [128, 5, 64] float32
// CHECK:      bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[0 : [320, 128], [1, 64]]
// CHECK-NEXT: bir.counted_loop_begin
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t.rot[0 : [128, 128], [1, 64]]
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t.rot[64 : [128, 128], [1, 64]]
// CHECK-NEXT: bir.counted_loop_end

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 64] float32
    bir.memloc @t : sbuf [128, 5, 64] float32
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[0 : [320, 128], [1, 64]] {id = 0 : i64, engine = "dve"}
    bir.counted_loop_begin {id = 1 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 4 : i64}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[64 : [320, 128], [1, 64] + 64*r1] {id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[128 : [320, 128], [1, 64] + 64*r1] {id = 3 : i64, engine = "dve"}
    bir.counted_loop_end {id = 4 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 2 : i64, bound = 4 : i64}
  }
}

// -----

// Kept whole: @c is carried (iteration i reads block i - 1, written by the previous execution of the body), @s has
// a static access inside the loop (the same block every iteration), @o is read after the loop in a block the loop
// wrote, @n moves with the inner loop of two nested rolled loops (its blocks come round in every outer iteration).
// CHECK-NOT: .rot
// CHECK:     bir.memloc @c : sbuf [128, 4, 64] float32
// CHECK-NOT: .rot
// CHECK:     bir.memloc @s : sbuf [128, 4, 64] float32
// CHECK-NOT: .rot
// CHECK:     bir.memloc @o : sbuf [128, 4, 64] float32
// CHECK-NOT: .rot
// CHECK:     bir.memloc @n : sbuf [128, 4, 64] float32
// CHECK-NOT: .rot
// CHECK:     bir.counted_loop_end {id = 10

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 64] float32
    bir.memloc @c : sbuf [128, 4, 64] float32
    bir.memloc @s : sbuf [128, 4, 64] float32
    bir.memloc @o : sbuf [128, 4, 64] float32
    bir.memloc @n : sbuf [128, 4, 64] float32
    bir.counted_loop_begin {id = 0 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 3 : i64}
    bir.tensor_copy dst @c[64 : [256, 128], [1, 64] + 64*r1], src @c[0 : [256, 128], [1, 64] + 64*r1] {id = 1 : i64, engine = "dve"}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 64] + 64*r1], src @s[192 : [256, 128], [1, 64]] {id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @o[0 : [256, 128], [1, 64] + 64*r1], src @x[0 : [64, 128], [1, 64]] {id = 3 : i64, engine = "dve"}
    bir.counted_loop_end {id = 4 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 1 : i64, bound = 3 : i64}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @o[64 : [256, 128], [1, 64]] {id = 5 : i64, engine = "dve"}
    bir.counted_loop_begin {id = 6 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 2 : i64}
    bir.counted_loop_begin {id = 7 : i64, engine = "unassigned", iv_reg = 2 : i64, bound = 4 : i64}
    bir.tensor_copy dst @n[0 : [256, 128], [1, 64] + 64*r2], src @x[0 : [64, 128], [1, 64]] {id = 8 : i64, engine = "dve"}
    bir.counted_loop_end {id = 9 : i64, engine = "unassigned", iv_reg = 2 : i64, step = 1 : i64, bound = 4 : i64}
    bir.counted_loop_end {id = 10 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 1 : i64, bound = 2 : i64}
  }
}

// -----

// Carried blocks (iteration i writes block i + 1 and reads block i, which the previous iteration wrote), the body
// interleaved by two: block b goes to slot b mod 2 in every use, before, in and after the loop, since no two blocks
// of one slot are live at once in program order; the register term goes and @t with it.
// CHECK:      bir.memloc @t.rot : sbuf [128, 2, 64] float32
// CHECK-NOT:  bir.memloc @t :
// CHECK:      bir.tensor_copy dst @t.rot[0 : [128, 128], [1, 64]], src @x
// CHECK-NEXT: bir.counted_loop_begin
// CHECK-NEXT: bir.tensor_copy dst @t.rot[64 : [128, 128], [1, 64]], src @x
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t.rot[0 : [128, 128], [1, 64]]
// CHECK-NEXT: bir.tensor_copy dst @t.rot[0 : [128, 128], [1, 64]], src @x
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t.rot[64 : [128, 128], [1, 64]]
// CHECK-NEXT: bir.counted_loop_end
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t.rot[0 : [128, 128], [1, 64]]

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 64] float32
    bir.memloc @t : sbuf [128, 6, 64] float32
    bir.tensor_copy dst @t[0 : [384, 128], [1, 64]], src @x[0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "dve"}
    bir.counted_loop_begin {id = 1 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 4 : i64}
    bir.tensor_copy dst @t[64 : [384, 128], [1, 64] + 64*r1], src @x[0 : [64, 128], [1, 64]] {id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[0 : [384, 128], [1, 64] + 64*r1] {id = 3 : i64, engine = "dve"}
    bir.tensor_copy dst @t[128 : [384, 128], [1, 64] + 64*r1], src @x[0 : [64, 128], [1, 64]] {id = 4 : i64, engine = "dve"}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[64 : [384, 128], [1, 64] + 64*r1] {id = 5 : i64, engine = "dve"}
    bir.counted_loop_end {id = 6 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 2 : i64, bound = 4 : i64}
    bir.tensor_copy dst @x[0 : [64, 128], [1, 64]], src @t[256 : [384, 128], [1, 64]] {id = 7 : i64, engine = "dve"}
  }
}
