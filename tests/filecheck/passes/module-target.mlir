// RUN: nkic-opt %s -p assign-engines --split-input-file | filecheck %s
// RUN: nkic-opt %s --generation trn1 -p assign-engines --split-input-file | filecheck %s --check-prefix=TRN1

// A module stamped with the generation it was traced for (the tracer writes nkic.target) is planned for that
// generation: on gen2 tensor_copy never runs on ScalarE ("On NeuronCore v2, tensor_copy is not supported on the
// Scalar Engine") and VectorE and GpSimd share the SBUF port, so the copies serialize whichever of the two runs
// them: all go to GpSimd, whose clock is faster; the same IR stamped gen3 spreads the copies over ACT, POOL and DVE
// (each to the engine that finishes it first).
// CHECK:      builtin.module attributes {nkic.target = "gen2"}
// CHECK:      bir.tensor_copy {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "pool"
// CHECK:      builtin.module attributes {nkic.target = "gen3"}
// CHECK:      bir.tensor_copy {{.*}} engine = "act"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "pool"
// CHECK-NEXT: bir.tensor_copy {{.*}} engine = "dve"

// --generation replaces the stamp of every module (trn1 is gen2): no copy is planned on ScalarE.
// TRN1:      builtin.module attributes {nkic.target = "gen2"}
// TRN1-NOT:  engine = "act"
// TRN1:      builtin.module attributes {nkic.target = "gen2"}
// TRN1-NOT:  engine = "act"

builtin.module attributes {nkic.target = "gen2"} {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.memloc @z : sbuf [128, 512] float32
    bir.memloc @w : sbuf [128, 512] float32
    bir.tensor_copy dst @y[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned"}
    bir.tensor_copy dst @z[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "unassigned"}
    bir.tensor_copy dst @w[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "unassigned"}
  }
}

// -----

builtin.module attributes {nkic.target = "gen3"} {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.memloc @z : sbuf [128, 512] float32
    bir.memloc @w : sbuf [128, 512] float32
    bir.tensor_copy dst @y[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned"}
    bir.tensor_copy dst @z[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "unassigned"}
    bir.tensor_copy dst @w[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "unassigned"}
  }
}
