// RUN: nkic-opt %s -p resolve-psum-accumulate --split-input-file --verify-diagnostics | filecheck %s

// accumulate=None: the first matmul into a PSUM location overwrites, later ones add; a fresh tensor
// (@p1) starts over; an explicit accumulate is kept.
// CHECK: bir.matmul dst @p0[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "pe", accumulate = false}
// CHECK-NEXT: bir.matmul dst @p0[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe", accumulate = true}
// CHECK-NEXT: bir.matmul dst @p1[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "pe", accumulate = false}
// CHECK-NEXT: bir.matmul dst @p1[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "pe", accumulate = false}

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @w : sbuf [128, 128] float32
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @p0 : psum [128, 512] float32
    bir.memloc @p1 : psum [128, 512] float32
    bir.matmul dst @p0[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "pe"}
    bir.matmul dst @p0[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe"}
    bir.matmul dst @p1[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "pe"}
    bir.matmul dst @p1[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "pe", accumulate = false}
  }
}

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @w : sbuf [128, 128] float32
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @p0 : psum [128, 512] float32
    bir.matmul dst @p0[0 : [512, 128], [1, 256]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 256]] {id = 0 : i64, engine = "pe"}
    bir.matmul dst @p0[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe"}
  }
}

// CHECK: matmul 1 (?) writes PSUM 'p0' partly over earlier matmul results; pass accumulate=True/False explicitly
