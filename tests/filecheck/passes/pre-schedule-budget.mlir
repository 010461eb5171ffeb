// RUN: nkic-opt %s -p pre-schedule | filecheck %s

// The live-memory budget (85% of gen3's 212984 bytes of SBUF per partition: 181036). After @a (160000 bytes) is
// set, both ready instructions would go past it: @x's memset (40000 more bytes) and the copy into @y (24000 more,
// and @a's last use, which frees 160000). The one that overshoots least goes first, so the copy finishes with @a
// before @x starts; the earliest in program order (@x) would have had 200000 bytes live at once.
// CHECK: bir.memset dst @a{{.*}} {id = 0 : i64
// CHECK-NEXT: bir.tensor_copy dst @y{{.*}} {id = 1 : i64
// CHECK-NEXT: bir.memset dst @x{{.*}} {id = 2 : i64

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 40000] float32
    bir.memloc @x : sbuf [128, 10000] float32
    bir.memloc @y : sbuf [128, 6000] float32
    bir.memset dst @a[0 : [40000, 128], [1, 40000]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    bir.memset dst @x[0 : [10000, 128], [1, 10000]] {id = 1 : i64, engine = "dve", value = 0.0 : f32}
    bir.tensor_copy dst @y[0 : [6000, 128], [1, 6000]], src @a[0 : [40000, 128], [1, 6000]] {id = 2 : i64, engine = "dve"}
  }
}
