// RUN: nkic-opt %s -p assign-engines --split-input-file --verify-diagnostics | filecheck %s

// Fixed homes (PE, ACT, Pool), the least-loaded legal engine for elementwise work (memset only on DVE or Pool, as
// the NKI reference says), never Pool with a PSUM operand, PE for a PSUM-destined transpose; a hint the engine
// cannot honour is an error.
// CHECK: bir.matmul {{.*}} engine = "pe"
// CHECK-NEXT: bir.activation {{.*}} engine = "act"
// CHECK-NEXT: bir.iota {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "dve"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "pool"
// CHECK-NEXT: bir.memset dst @x{{.*}} engine = "dve"
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @p{{.*}} engine = "act"
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

// CHECK: instruction 0 (tensor_copy): cannot run on pool: nisa.tensor_copy: POOL (GpSimdE) cannot read PSUM ('src')

// -----

// Only the engines the reference names: tensor_tensor and memset never on ACT, tensor_reduce and
// scalar_tensor_tensor only on DVE, however loaded DVE and Pool are; tensor_scalar on Pool only for rsqrt;
// tensor_tensor's power only on Pool. The first fp32 tensor_tensor finishes earlier on Pool (1.2 GHz) than on DVE
// (0.96 GHz), the second then on DVE.
// CHECK: bir.activation {{.*}} engine = "act"
// CHECK-NEXT: bir.tensor_tensor {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_tensor {{.*}} engine = "dve"
// CHECK-NEXT: bir.memset {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_reduce {{.*}} engine = "dve"
// CHECK-NEXT: bir.scalar_tensor_tensor {{.*}} engine = "dve"
// CHECK-NEXT: bir.tensor_scalar {{.*}} engine = "act"
// CHECK-NEXT: bir.tensor_scalar {{.*}} engine = "pool", op0 = "rsqrt"
// CHECK-NEXT: bir.tensor_tensor {{.*}} engine = "pool"{{.*}} op = "power"
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.memloc @r : sbuf [128, 1] float32
    bir.activation dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned", func = "exp"}
    bir.tensor_tensor dst @y[0 : [512, 128], [1, 512]], data1 @x[0 : [512, 128], [1, 512]], data2 @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "unassigned", op = "add"}
    bir.tensor_tensor dst @y[0 : [512, 128], [1, 512]], data1 @x[0 : [512, 128], [1, 512]], data2 @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "unassigned", op = "add"}
    bir.memset dst @x[0 : [512, 128], [1, 512]] {id = 3 : i64, engine = "unassigned", value = 0.0 : f32}
    bir.tensor_reduce dst @r[0 : [1, 128], [1, 1]], data @x[0 : [512, 128], [1, 512]] {id = 4 : i64, engine = "unassigned", op = "add", axes = array<i64: 1>}
    bir.scalar_tensor_tensor dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]], operand1 @x[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "unassigned", op0 = "multiply", operand0 = 2.0 : f32, op1 = "add"}
    bir.tensor_scalar dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 6 : i64, engine = "unassigned", op0 = "multiply", operand0 = 2.0 : f32}
    bir.tensor_scalar dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 7 : i64, engine = "unassigned", op0 = "rsqrt", operand0 = 0.0 : f32}
    bir.tensor_tensor dst @y[0 : [512, 128], [1, 512]], data1 @x[0 : [512, 128], [1, 512]], data2 @x[0 : [512, 128], [1, 512]] {id = 8 : i64, engine = "unassigned", op = "power"}
  }
}

// -----

// tensor_reduce reading PSUM: DVE (the only engine the reference names, and it reaches PSUM).
// CHECK: bir.tensor_reduce {{.*}} engine = "dve"
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @p : psum [128, 512] float32
    bir.memloc @r : sbuf [128, 1] float32
    bir.tensor_reduce dst @r[0 : [1, 128], [1, 1]], data @p[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned", op = "maximum", axes = array<i64: 1>}
  }
}

// -----

// An explicit engine the reference excludes is refused.
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memset dst @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "act", value = 0.0 : f32}
  }
}

// CHECK: instruction 0 (memset): cannot run on act: nisa.memset runs on dve, pool (the NKI ISA reference), not act

// -----

// Shared ports: on trn1 VectorE and GpSimd share SBUF access, so while Pool's iota holds the port a tensor_scalar
// finishes earlier on the busy ACT (its exp ends at 1.5 us, the iota at 3.0 us) than on the idle DVE.
// CHECK: bir.activation {{.*}} engine = "act"
// CHECK-NEXT: bir.iota {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_scalar {{.*}} engine = "act"
builtin.module attributes {nkic.target = "gen2"} {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @v : sbuf [128, 2048] float32
    bir.memloc @w : sbuf [128, 4096] float32
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.activation dst @v[0 : [2048, 128], [1, 2048]], data @v[0 : [2048, 128], [1, 2048]] {id = 0 : i64, engine = "unassigned", func = "exp"}
    bir.iota dst @w[0 : [4096, 128], [1, 4096]] {id = 1 : i64, engine = "unassigned", pattern = #nkic.ap<0 : [1, 4096]>}
    bir.tensor_scalar dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "unassigned", op0 = "multiply", operand0 = 2.0 : f32}
  }
}

// -----

// trn2 has no shared SBUF port for fp32 work: the same tensor_scalar goes to the idle DVE.
// CHECK: bir.activation {{.*}} engine = "act"
// CHECK-NEXT: bir.iota {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_scalar {{.*}} engine = "dve"
builtin.module attributes {nkic.target = "gen3"} {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @v : sbuf [128, 2048] float32
    bir.memloc @w : sbuf [128, 4096] float32
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.activation dst @v[0 : [2048, 128], [1, 2048]], data @v[0 : [2048, 128], [1, 2048]] {id = 0 : i64, engine = "unassigned", func = "exp"}
    bir.iota dst @w[0 : [4096, 128], [1, 4096]] {id = 1 : i64, engine = "unassigned", pattern = #nkic.ap<0 : [1, 4096]>}
    bir.tensor_scalar dst @y[0 : [512, 128], [1, 512]], data @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "unassigned", op0 = "multiply", operand0 = 2.0 : f32}
  }
}
