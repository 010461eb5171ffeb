// RUN: nkic-opt %s -p bir-unroll --verify-diagnostics | filecheck %s

// A memloc's scope names its loop by label: two loops labelled alike in one function cannot be unrolled
// correctly (the first would take both loops' scoped tensors), so the pass refuses them.
// CHECK: @f has two loops labelled 'L0': loop labels must be unique in a function (memloc scopes name them)

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @w : sbuf [128, 128] float32
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @p : psum [128, 512] float32 {scope = "L0"}
    bir.memloc @q : psum [128, 512] float32
    bir.loop "L0" "affine" 0 to 2 step 1 {
      bir.matmul dst @p[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "pe"}
    }
    bir.loop "L0" "affine" 0 to 2 step 1 {
      bir.matmul dst @q[0 : [512, 128], [1, 512]], stationary @w[0 : [128, 128], [1, 128]], moving @x[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe"}
    }
  }
}
