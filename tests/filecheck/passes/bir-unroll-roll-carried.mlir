// RUN: nkic-opt %s -p 'bir-unroll{roll=true}' --split-input-file | filecheck %s
// RUN: nkic-opt %s -p 'bir-unroll{roll=true},rotate-blocks' --split-input-file | filecheck %s --check-prefix=ROT

// A block tensor declared larger than SBUF (64 blocks of 4 KiB) whose blocks a loop carries from one iteration to
// the next (iteration i writes block i + 1, reads block i): its rolled body holds two iterations (the counter steps
// by 2, the odd iteration left over runs before the loop), so that rotate-blocks can put block b in slot b mod 2.
// CHECK:      bir.counted_loop_begin {{.*}}bound = 62
// CHECK:      bir.counted_loop_end {{.*}}step = 2 : i64, bound = 62
// ROT:        bir.memloc @t.rot : sbuf [128, 2, 1024] float32
// ROT-NOT:    bir.memloc @t :
// ROT:        bir.counted_loop_begin
// ROT-NEXT:   bir.tensor_copy dst @t.rot[{{[0-9]+}} : [2048, 128], [1, 1024]]

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 1024] float32
    bir.memloc @t : sbuf [128, 64, 1024] float32
    bir.tensor_copy dst @t[0 : [65536, 128], [1, 1024]], src @x[0 : [1024, 128], [1, 1024]] {id = 0 : i64, engine = "dve"}
    bir.loop "L0" "affine" 0 to 63 step 1 {
      bir.tensor_copy dst @t[1024 + 1024*i0 : [65536, 128], [1, 1024]], src @x[0 : [1024, 128], [1, 1024]] {id = 1 : i64, engine = "dve"}
      bir.tensor_copy dst @x[0 : [1024, 128], [1, 1024]], src @t[0 + 1024*i0 : [65536, 128], [1, 1024]] {id = 2 : i64, engine = "dve"}
    }
  }
}

// -----

// The same loop over a block tensor that fits SBUF keeps one iteration per body (interleaving is the user's choice).
// CHECK: bir.counted_loop_end {{.*}}step = 1 : i64, bound = 15

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 1024] float32
    bir.memloc @t : sbuf [128, 16, 1024] float32
    bir.tensor_copy dst @t[0 : [16384, 128], [1, 1024]], src @x[0 : [1024, 128], [1, 1024]] {id = 0 : i64, engine = "dve"}
    bir.loop "L0" "affine" 0 to 15 step 1 {
      bir.tensor_copy dst @t[1024 + 1024*i0 : [16384, 128], [1, 1024]], src @x[0 : [1024, 128], [1, 1024]] {id = 1 : i64, engine = "dve"}
      bir.tensor_copy dst @x[0 : [1024, 128], [1, 1024]], src @t[0 + 1024*i0 : [16384, 128], [1, 1024]] {id = 2 : i64, engine = "dve"}
    }
  }
}
