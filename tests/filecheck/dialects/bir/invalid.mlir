// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve", deps = [#bir.dep<true, 0>]}
  }
}
// CHECK: unknown dependency kind 'true'

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "gpu"}
  }
}
// CHECK: unknown engine 'gpu'

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.tensor_copy dst @y[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve"}
  }
}
// CHECK: 'bir.tensor_copy' (id 1) uses undeclared memloc @y

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : dram [128, 512] float32
  }
}
// CHECK: unknown memory space 'dram'

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.nki_kernel {func = @k, kernel_source = "Beta9", func_args = {}, func_outs = {}, grid = 1 : i64}
  }
}
// CHECK: unknown kernel source 'Beta9'

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.nki_klir_kernel {kernel_name = "k", kernel_format = "onnx", klir_binary = "", func_args = {}, func_outs = {}, grid = 1 : i64, sb_buf_shape = array<i64: 128, 0>, psum_buf_shape = array<i64: 128, 0>, nki_binary_version_identifier = "x"}
  }
}
// CHECK: unknown kernel format 'onnx'

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [256, 512] float32
  }
}
// CHECK: partition dimension 256 exceeds the architecture limit of 128

// -----

builtin.module {
  bir.function @f attributes {inputs = ["a"], outputs = []} {
    bir.memloc @a : sbuf [128, 512] float32
  }
}
// CHECK: function input 'a' must be a memloc of kind input

// -----

// The verifiers check what the backend passes assume (issue 12): a loop advances, an address is (partition, byte
// offset) inside the partition, every pattern stays inside its memloc for every iteration and uses only the loops
// around it, shapes and addresses are i64.
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.loop "L0" "affine" 0 to 4 step 0 {
      bir.tensor_copy dst @x[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "dve"}
    }
  }
}
// CHECK: loop 'L0' has step 0

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32 {address = array<i64: 0>}
  }
}
// CHECK: memloc @x: address [0] must be (start partition, byte offset)

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [64, 512] float32 {address = array<i64: 96, 0>}
  }
}
// CHECK: memloc @x: partitions 96..159 are not all in 0..127

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : psum [128, 512] float32 {address = array<i64: 0, 16000>}
  }
}
// CHECK: memloc @x: bytes [16000, 18048) of each partition are not all in the 16384-byte psum partition

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : hbm [128, 512] float32 {address = array<i64: 0, 0>}
  }
}
// CHECK: memloc @x: only on-chip memlocs have an address

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : psum [128, 511] float32
    bir.matmul dst @y[0 : [512, 128], [1, 512]], stationary @x[0 : [512, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe"}
  }
}
// CHECK: 'bir.matmul' (id 1) 'dst' reaches elements 0..65535 of @y, which has 65408

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.loop "L0" "affine" 0 to 4 step 1 {
      bir.tensor_copy dst @x[0 + 256*i0 : [512, 128], [1, 128]], src @x[0 : [512, 128], [1, 128]] {id = 1 : i64, engine = "dve"}
    }
  }
}
// CHECK: 'bir.tensor_copy' (id 1) 'dst' reaches elements 0..65919 of @x, which has 65536

// -----

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.tensor_copy dst @x[0 + 1*i0 : [512, 128], [1, 128]], src @x[0 : [512, 128], [1, 128]] {id = 1 : i64, engine = "dve"}
  }
}
// CHECK: 'bir.tensor_copy' (id 1) 'dst' uses loop index i0 inside 0 loops

