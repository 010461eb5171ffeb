// RUN: not nkic-opt %s -p 'bir-unroll{max-instructions=5}' 2>&1 | filecheck %s
// RUN: env NKIC_MAX_INSTRUCTIONS=7 not nkic-opt %s -p bir-unroll 2>&1 | filecheck %s --check-prefix=ENV

// bir-unroll counts the instructions a function unrolls to before it expands anything: a trip count of 10^9 is an
// error at once (naming how to raise the limit), not an endless expansion.
// CHECK: @f unrolls to 1000000000 instructions, over the limit of 5: raise it with NKIC_MAX_INSTRUCTIONS=N or bir-unroll{max-instructions=N}
// CHECK-NOT: Traceback
// ENV: over the limit of 7
// OK-NOT: over the limit

builtin.module {
  bir.function @f attributes {inputs = ["a"], outputs = []} {
    bir.memloc @a : shared_hbm [256, 1024] float32 {kind = "input"}
    bir.memloc @t : sbuf [128, 512] float32 {scope = "L0"}
    bir.loop "L0" "affine" 0 to 1000000000 step 1 {
      bir.dma_copy dst @t[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    }
  }
}
