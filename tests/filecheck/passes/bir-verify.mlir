// RUN: nkic-opt %s -p bir-verify --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 512] float32
    bir.memset dst @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
  }
}

// CHECK: @f instruction 0 (memset): memloc 'a' has no address

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memset dst @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned", value = 0.0 : f32}
  }
}

// CHECK: @f instruction 0 (memset): no engine assigned

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.memset dst @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "dve", value = 0.0 : f32, signal = 2 : i64, waits = array<i64: 1, 1>}
  }
}

// CHECK: @f instruction 0 (memset): waits for semaphore 1 >= 1, but only 0 earlier instructions signal it (the schedule would deadlock)

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 512] float32 {address = array<i64: 0, 0>}
    bir.loop "L0" "affine" 0 to 2 step 1 {
      bir.memset dst @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "dve", value = 0.0 : f32}
    }
  }
}

// CHECK: @f: 'bir.loop' must be lowered before the backend
