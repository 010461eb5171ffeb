// RUN: nkic-opt %s -p allocate-memory | filecheck %s
// Policies (the RUN lines below): @p (live 0..2) and @q (live 1) are freed in the other order than their offsets.
// @s (from 3) fits in either's bytes. rotate wraps around to the lowest offset, @p's, whose last use (2) is the
// more recent: @s's first write would wait for it. lru takes @q's bytes, last used longest ago (1). stack reuses
// at once: @r already takes @q's bytes (dead after 1) and @s @p's.
// RUN: nkic-opt %s -p 'allocate-memory{policy=lru}' | filecheck %s --check-prefix=LRU
// RUN: nkic-opt %s -p 'allocate-memory{policy=stack}' | filecheck %s --check-prefix=STACK
// CHECK-DAG: bir.memloc @s : sbuf [128, 10000] float32 {address = array<i64: 0, 0>}
// CHECK-DAG: bir.memloc @r : sbuf [128, 30000] float32 {address = array<i64: 0, 80000>}
// LRU-DAG: bir.memloc @s : sbuf [128, 10000] float32 {address = array<i64: 0, 40000>}
// LRU-DAG: bir.memloc @r : sbuf [128, 30000] float32 {address = array<i64: 0, 80000>}
// STACK-DAG: bir.memloc @s : sbuf [128, 10000] float32 {address = array<i64: 0, 0>}
// STACK-DAG: bir.memloc @r : sbuf [128, 30000] float32 {address = array<i64: 0, 40000>}

builtin.module {
  bir.function @g attributes {inputs = [], outputs = []} {
    bir.memloc @p : sbuf [128, 10000] float32
    bir.memloc @q : sbuf [128, 10000] float32
    bir.memloc @r : sbuf [128, 30000] float32
    bir.memloc @s : sbuf [128, 10000] float32
    bir.memset dst @p[0 : [10000, 128], [1, 10000]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    bir.memset dst @q[0 : [10000, 128], [1, 10000]] {id = 1 : i64, engine = "dve", value = 0.0 : f32}
    bir.tensor_copy dst @r[0 : [30000, 128], [1, 10000]], src @p[0 : [10000, 128], [1, 10000]] {id = 2 : i64, engine = "dve"}
    bir.memset dst @s[0 : [10000, 128], [1, 10000]] {id = 3 : i64, engine = "dve", value = 0.0 : f32}
  }
}
