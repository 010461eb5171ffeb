// RUN: nkic-opt %s -p isa-verify --split-input-file --verify-diagnostics | filecheck %s

// A schedule where ACT waits for DVE's first instruction while DVE waits for ACT's: both engines stall.
builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.tensor_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 16]], src sbuf(p0, 0x80, float32)[0 : [1, 128], [1, 16]] {id = 0 : i64, wait_sem = 2 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}
    }
    isa.stream "dve" {
      isa_dve.memset dst sbuf(p0, 0x40, float32)[0 : [1, 128], [1, 16]] {id = 1 : i64, value = 0.0 : f32, wait_sem = 1 : i64, wait_value = 1 : i64, signal_sem = 2 : i64}
    }
  }
}

// CHECK: @sg00: the semaphore schedule deadlocks: act: instruction 0 waits for semaphore 2 >= 1 (it reaches 0); dve: instruction 1 waits for semaphore 1 >= 1 (it reaches 0)

// -----

// The same two instructions ordered through one semaphore are fine.
// CHECK: isa_act.tensor_copy
// CHECK: isa_dve.memset {{.*}} wait_sem = 1 : i64, wait_value = 1 : i64
builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.tensor_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 16]], src sbuf(p0, 0x80, float32)[0 : [1, 128], [1, 16]] {id = 0 : i64, signal_sem = 1 : i64}
    }
    isa.stream "dve" {
      isa_dve.memset dst sbuf(p0, 0x40, float32)[0 : [1, 128], [1, 16]] {id = 1 : i64, value = 0.0 : f32, wait_sem = 1 : i64, wait_value = 1 : i64, signal_sem = 2 : i64}
    }
  }
}

// -----

// Cores are the NEFF's subgraphs sg00, sg01, ... in order: a misnamed one is refused here, not by the NEFF writer.
builtin.module {
  isa.core @sgx0 {
    isa.var @a : input [128, 512] float32 {var_id = 0 : i64}
  }
}
// CHECK: isa.core 0 must be named @sg00, not @sgx0

// -----

// The documented rules hold in ISA text too (the rule objects the nisa call, penguin and bir-verify ask):
// tensor_tensor cannot read two PSUM tiles.
builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 psum(p0, 0x800, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, op = "add"}
    }
  }
}

// CHECK: @sg00: instruction 0 (TENSOR_TENSOR): tensor_tensor: data1 and data2 cannot both be in PSUM (the NKI reference: "However, the two input tiles, data1 and data2 cannot both reside in PSUM.")

// -----

// Tensor indirection in ISA text, where every operand's start partition is known: the index of an .indirect() view
// starts on a quadrant boundary (here partition 16).
builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_copy dst sbuf(p16, 0x800, float32)[0 : [1, 16], [1, 32]], src sbuf(p16, 0x0, float32)[0 : [1, 16], [1, 32] + 1*indirect src_offset], src_offset sbuf(p16, 0x4000, int32)[0 : [1, 16], [1, 2]] {id = 0 : i64}
    }
  }
}

// CHECK: @sg00: instruction 0 (TENSOR_COPY): tensor_copy: the index of 'src'.indirect() starts on partition 16, not on a quadrant boundary (a multiple of 32) (the NKI reference: "When operands are manually allocated, their base partitions must satisfy:")

// -----

// On the Scalar engine a scattered dst is not in PSUM (the engine is the instruction's stream).
builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.tensor_copy dst psum(p0, 0x0, float32)[0 : [1, 32], [1, 32] + 1*indirect dst_offset], src sbuf(p0, 0x0, float32)[0 : [1, 32], [1, 32]], dst_offset sbuf(p0, 0x4000, int32)[0 : [1, 32], [1, 1]] {id = 0 : i64}
    }
  }
}

// CHECK: @sg00: instruction 0 (TENSOR_COPY): tensor_copy: on the Scalar engine a scattered (indirect) dst cannot be in PSUM (the NKI reference: "In addition, on the Scalar engine a scattered dst cannot be in PSUM.")
