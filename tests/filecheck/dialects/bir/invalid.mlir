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
