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

// -----

// The documented rules hold in BIR too (the same rule objects the nisa call and the penguin verifier ask):
// tensor_tensor cannot read two PSUM tiles.
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @p : psum [128, 128] float32 {address = array<i64: 0, 0>}
    bir.memloc @x : sbuf [128, 128] float32 {address = array<i64: 0, 0>}
    bir.tensor_tensor dst @x[0 : [128, 128], [1, 128]], data1 @p[0 : [128, 128], [1, 128]], data2 @p[0 : [128, 128], [1, 128]] {id = 0 : i64, engine = "dve", op = "add"}
  }
}

// CHECK: @f instruction 0 (tensor_tensor): tensor_tensor: data1 and data2 cannot both be in PSUM (the NKI reference: "However, the two input tiles, data1 and data2 cannot both reside in PSUM.")

// -----

// A module that names its generation gets that generation's rules: a bf16 matmul result is not allowed on gen3.
builtin.module attributes {nkic.target = "gen3"} {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 128] bfloat16 {address = array<i64: 0, 0>}
    bir.memloc @p : psum [128, 128] bfloat16 {address = array<i64: 0, 0>}
    bir.matmul dst @p[0 : [128, 128], [1, 128]], stationary @a[0 : [128, 128], [1, 128]], moving @a[0 : [128, 128], [1, 128]] {id = 0 : i64, engine = "pe"}
  }
}

// CHECK: @f instruction 0 (matmul): nc_matmul: the PSUM result 'dst' is bfloat16, it must be float32 on NeuronCore-v3

// -----

// ... and the same instruction in a gen4 module is legal (a bf16 PSUM result from NeuronCore-v4).
builtin.module attributes {nkic.target = "gen4"} {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @a : sbuf [128, 128] bfloat16 {address = array<i64: 0, 0>}
    bir.memloc @p : psum [128, 128] bfloat16 {address = array<i64: 0, 0>}
    bir.matmul dst @p[0 : [128, 128], [1, 128]], stationary @a[0 : [128, 128], [1, 128]], moving @a[0 : [128, 128], [1, 128]] {id = 0 : i64, engine = "pe"}
  }
}

// CHECK-LABEL: bir.function @f
// CHECK: bir.matmul

// -----

// Tensor indirection in BIR: an indirect moving operand of a transposing matmul breaks "When is_transpose=True,
// moving cannot use tensor indirection."
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @s : sbuf [128, 128] bfloat16 {address = array<i64: 0, 0>}
    bir.memloc @i : sbuf [128, 1] int32 {address = array<i64: 0, 4096>}
    bir.memloc @p : psum [128, 128] bfloat16 {address = array<i64: 0, 0>}
    bir.matmul dst @p[0 : [128, 128], [1, 128]], stationary @s[0 : [128, 128], [1, 128]], moving @s[0 : [128, 128], [1, 128] + 1*indirect moving_offset], moving_offset @i[0 : [1, 128], [1, 1]] {id = 0 : i64, engine = "pe", is_transpose = true}
  }
}

// CHECK: @f instruction 0 (matmul): nc_matmul: with is_transpose=True, moving cannot be a tensor indirection view (the NKI reference: "When is_transpose=True, moving cannot use tensor indirection.")
