// RUN: nkic-opt %s -p post-schedule | filecheck %s
// RUN: nkic-opt %s -p schedule-instructions | filecheck %s --check-prefix=LIST

// DVE has two memsets ready at the start: @a's, which nothing reads, and @b's, which feeds a chain of two ACT
// exps. The earliest-start scheduler keeps them in program order, so ACT idles while DVE fills @a; post-schedule
// takes the one with the longest path to the end first (@b), and the chain runs on ACT while DVE fills @a. Ids are
// renumbered and the edges follow.
// LIST: bir.memset dst @a{{.*}}id = 0 : i64
// LIST-NEXT: bir.memset dst @b{{.*}}id = 1 : i64
// CHECK: bir.memset dst @b{{.*}} {id = 0 : i64, engine = "dve"
// CHECK-NEXT: bir.memset dst @a{{.*}} {id = 1 : i64, engine = "dve"
// CHECK-NEXT: bir.activation dst @c{{.*}} {id = 2 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.activation dst @d{{.*}} {id = 3 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 2>]}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 4096] float32 {address = array<i64: 0, 0>}
    bir.memloc @b : sbuf [128, 2048] float32 {address = array<i64: 0, 16384>}
    bir.memloc @c : sbuf [128, 2048] float32 {address = array<i64: 0, 24576>}
    bir.memloc @d : sbuf [128, 2048] float32 {address = array<i64: 0, 32768>}
    bir.memset dst @a[0 : [4096, 128], [1, 4096]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    bir.memset dst @b[0 : [2048, 128], [1, 2048]] {id = 1 : i64, engine = "dve", value = 0.0 : f32}
    bir.activation dst @c[0 : [2048, 128], [1, 2048]], data @b[0 : [2048, 128], [1, 2048]] {id = 2 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 1>]}
    bir.activation dst @d[0 : [2048, 128], [1, 2048]], data @c[0 : [2048, 128], [1, 2048]] {id = 3 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 2>]}
  }
}
