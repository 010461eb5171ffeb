// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Constant contents (nl.shared_constant) at each level: HBM only, exactly the tensor's bytes, well-formed hex.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %c = penguin.alloc "c" {data = "0x00000000"} : !penguin.tensor<sbuf, 1x1xf32>
    penguin.return
  }
}
// CHECK: a constant (data) lives in HBM

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %c = penguin.alloc "c" {data = "0x0000"} : !penguin.tensor<shared_hbm, 1x1xf32>
    penguin.return
  }
}
// CHECK: constant data has 2 bytes, the tensor needs 4

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %c = penguin.alloc "c" {data = "0xzz00803f"} : !penguin.tensor<shared_hbm, 1x1xf32>
    penguin.return
  }
}
// CHECK: constant data is not well-formed hex

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @c : shared_hbm [1, 1] float32 {kind = "constant"}
  }
}
// CHECK: a constant memloc, and only it, carries data

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @c : shared_hbm [1, 1] float32 {data = "0x0000803f"}
  }
}
// CHECK: a constant memloc, and only it, carries data

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @c : file [1, 1] float32 {var_id = 0 : i64}
  }
}
// CHECK: a file variable (a constant), and only it, carries data

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @c : file [1, 2] float32 {var_id = 0 : i64, data = "0x0000803f"}
  }
}
// CHECK: constant data has 4 bytes, the tensor needs 8
