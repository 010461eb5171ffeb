// RUN: nkic-opt %s -p assign-engines --split-input-file --verify-diagnostics | filecheck %s

// Fixed homes (PE, ACT, Pool), the least-loaded legal engine for elementwise work, never Pool with a PSUM
// operand, PE for a PSUM-destined transpose; a hint the engine cannot honour is an error.
// CHECK: bir.matmul {{.*}} engine = "pe"
// CHECK-NEXT: bir.activation {{.*}} engine = "act"
// CHECK-NEXT: bir.iota {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "dve"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "pool"
// CHECK-NEXT: bir.memset dst @x{{.*}} engine = "act"
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @p{{.*}} engine = "dve"
// CHECK-NEXT: bir.transpose {{.*}} engine = "pe"

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @w : sbuf [128, 128] float32
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.memloc @p : psum [128, 512] float32
    bir.matmul dst @p[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned"}
    bir.activation dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "unassigned", func = "exp"}
    bir.iota dst @w[0 : [128, 128], [1, 128]] {id = 2 : i64, engine = "unassigned", pattern = #nkic.ap<0 : [1, 128]>}
    bir.tensor_copy dst @y[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "unassigned"}
    bir.tensor_copy dst @y[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "unassigned"}
    bir.memset dst @x[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "unassigned", value = 0.0 : f32}
    bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @p[0 : [512, 128], [1, 512]] {id = 6 : i64, engine = "unassigned"}
    bir.transpose dst @p[0 : [512, 128], [1, 128]], data @w[0 : [128, 128], [1, 128]] {id = 7 : i64, engine = "unassigned"}
  }
}

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @p : psum [128, 512] float32
    bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @p[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "pool"}
  }
}

// CHECK: instruction 0 (tensor_copy) cannot run on pool; legal engines: dve, act
