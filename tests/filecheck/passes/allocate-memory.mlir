// RUN: nkic-opt %s -p allocate-memory --split-input-file --verify-diagnostics | filecheck %s

// @a and @b are live together; @c goes after @b (rotation: no reuse while free memory remains); @d does not fit
// after @c, wraps around and reuses @a's bytes once @a is dead; the explicit @fixed stays where the kernel put
// it and nothing lands on it; PSUM tiles never straddle a 2 KiB bank.
// CHECK-DAG: bir.memloc @fixed : sbuf [128, 16] float32 {address = array<i64: 0, 0>}
// CHECK-DAG: bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 64>}
// CHECK-DAG: bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 2112>}
// CHECK-DAG: bir.memloc @c : sbuf [128, 512] float32 {address = array<i64: 0, 4160>}
// CHECK-DAG: bir.memloc @d : sbuf [128, 52000] float32 {address = array<i64: 0, 64>}
// CHECK-DAG: bir.memloc @p : psum [128, 384] float32 {address = array<i64: 0, 0>}
// CHECK-DAG: bir.memloc @q : psum [128, 384] float32 {address = array<i64: 0, 2048>}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @fixed : sbuf [128, 16] float32 {address = array<i64: 0, 0>}
    bir.memloc @a : sbuf [128, 512] float32
    bir.memloc @b : sbuf [128, 512] float32
    bir.memloc @c : sbuf [128, 512] float32
    bir.memloc @d : sbuf [128, 52000] float32
    bir.memloc @p : psum [128, 384] float32
    bir.memloc @q : psum [128, 384] float32
    bir.memset dst @fixed[0 : [16, 128], [1, 16]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    bir.memset dst @a[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve", value = 0.0 : f32}
    bir.tensor_copy dst @b[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @c[0 : [512, 128], [1, 512]], src @b[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "dve"}
    bir.memset dst @p[0 : [384, 128], [1, 384]] {id = 4 : i64, engine = "dve", value = 0.0 : f32}
    bir.tensor_copy dst @q[0 : [384, 128], [1, 384]], src @p[0 : [384, 128], [1, 384]] {id = 5 : i64, engine = "dve"}
    bir.tensor_copy dst @fixed[0 : [16, 128], [1, 16]], src @c[0 : [16, 128], [1, 16]] {id = 6 : i64, engine = "dve"}
    bir.memset dst @d[0 : [52000, 128], [1, 52000]] {id = 7 : i64, engine = "dve", value = 0.0 : f32}
  }
}

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 40000] float32
    bir.memloc @b : sbuf [128, 40000] float32
    bir.memset dst @a[0 : [40000, 128], [1, 40000]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    bir.tensor_copy dst @b[0 : [40000, 128], [1, 40000]], src @a[0 : [40000, 128], [1, 40000]] {id = 1 : i64, engine = "dve"}
  }
}

// Both tensors are used by the copy, so spilling cannot make room: the message names what is live, where it was
// allocated, and the remedies.
// CHECK: kernel does not fit in SBUF: tensor 'b' needs 160000 bytes per partition while 160000 of 212984 bytes per partition are live (at instruction 1); the largest live: 'a' 160000 bytes (even with spilling: keep fewer tiles live at once, e.g. rolled loops with --roll-loops, or smaller tiles)

