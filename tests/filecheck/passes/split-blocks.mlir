// RUN: nkic-opt %s -p "split-blocks{always=true}" --split-input-file --verify-diagnostics | filecheck %s

// A [P, B, F] tensor whose every access stays in one block of dim 1 becomes one memloc per block used, each access
// re-based onto its block (the partition step becomes the block's row); blocks never touched get no memloc.
// CHECK:      bir.memloc @t.b0 : sbuf [128, 64] float32 {loc = "k.py:3"}
// CHECK-NEXT: bir.memloc @t.b2 : sbuf [128, 64] float32 {loc = "k.py:3"}
// CHECK-NOT:  bir.memloc @t :
// CHECK:      bir.tensor_copy dst @t.b0[0 : [64, 128], [1, 64]], src @x[0 : [64, 128], [1, 64]]
// CHECK-NEXT: bir.tensor_copy dst @t.b2[0 : [64, 128], [1, 64]], src @x[0 : [64, 128], [1, 64]]
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 64], [1, 32]], src @t.b2[32 : [64, 64], [1, 32]]
// CHECK-NEXT: bir.tensor_copy dst @x[0 : [64, 128], [2, 32]], src @t.b0[0 : [64, 128], [2, 32]]

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 64] float32
    bir.memloc @t : sbuf [128, 4, 64] float32 {loc = "k.py:3"}
    bir.tensor_copy dst @t[0 : [256, 128], [1, 64]], src @x[0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "dve"}
    bir.tensor_copy dst @t[128 : [256, 128], [1, 64]], src @x[0 : [64, 128], [1, 64]] {id = 1 : i64, engine = "dve"}
    bir.tensor_copy dst @x[0 : [64, 64], [1, 32]], src @t[160 : [256, 64], [1, 32]] {id = 2 : i64, engine = "dve"}
    bir.tensor_copy dst @x[0 : [64, 128], [2, 32]], src @t[0 : [256, 128], [2, 32]] {id = 3 : i64, engine = "dve"}
  }
}

// -----

// An access spanning two blocks (here: all four, as one [128, 256] tile) keeps the tensor whole; so do a fixed
// address, a rank-2 tensor and an access through a view of another dtype that crosses a block.
// CHECK:     bir.memloc @t : sbuf [128, 4, 64] float32
// CHECK:     bir.memloc @a : sbuf [128, 4, 64] float32 {address = array<i64: 0, 0>}
// CHECK:     bir.memloc @v : sbuf [128, 4, 64] bfloat16
// CHECK-NOT: .b0
// CHECK:     bir.tensor_copy dst @t[0 : [256, 128], [1, 256]]

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 256] float32
    bir.memloc @t : sbuf [128, 4, 64] float32
    bir.memloc @a : sbuf [128, 4, 64] float32 {address = array<i64: 0, 0>}
    bir.memloc @v : sbuf [128, 4, 64] bfloat16
    bir.tensor_copy dst @t[0 : [256, 128], [1, 256]], src @x[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "dve"}
    bir.tensor_copy dst @a[0 : [256, 128], [1, 64]], src @x[0 : [256, 128], [1, 64]] {id = 1 : i64, engine = "dve"}
    bir.tensor_copy dst @x[0 : [256, 128], [1, 64]], src @v[0 : [128, 128], [1, 64] as float32] {id = 2 : i64, engine = "dve"}
  }
}

// -----

// By default only a tensor larger than its memory on the target is split: blocks kept in one memloc let
// dma-optimization merge neighbouring loads.
// RUN: nkic-opt %s -p split-blocks --split-input-file | filecheck %s --check-prefix=DEFAULT
// DEFAULT:     bir.memloc @small : sbuf [128, 4, 64] float32
// DEFAULT:     bir.memloc @big.b0 : sbuf [128, 1024] float32
// DEFAULT:     bir.memloc @big.b63 : sbuf [128, 1024] float32
// DEFAULT-NOT: bir.memloc @big :

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 1024] float32
    bir.memloc @small : sbuf [128, 4, 64] float32
    bir.memloc @big : sbuf [128, 64, 1024] float32
    bir.tensor_copy dst @small[0 : [256, 128], [1, 64]], src @x[0 : [1024, 128], [1, 64]] {id = 0 : i64, engine = "dve"}
    bir.tensor_copy dst @big[0 : [65536, 128], [1, 1024]], src @x[0 : [1024, 128], [1, 1024]] {id = 1 : i64, engine = "dve"}
    bir.tensor_copy dst @big[64512 : [65536, 128], [1, 1024]], src @x[0 : [1024, 128], [1, 1024]] {id = 2 : i64, engine = "dve"}
  }
}

// -----

// The bank rule: a PSUM block tensor that fits PSUM whole is split anyway when laid out whole one of its blocks
// would span two 2 KiB banks (blocks of 1536 bytes: block 1 covers bytes 1536..3071); blocks that tile the banks
// (512 bytes: four to a bank) stay in one memloc.
// RUN: nkic-opt %s -p split-blocks --split-input-file | filecheck %s --check-prefix=BANKS
// BANKS:     bir.memloc @tiled : psum [128, 4, 128] float32
// BANKS:     bir.memloc @acc.b0 : psum [128, 384] float32
// BANKS:     bir.memloc @acc.b1 : psum [128, 384] float32
// BANKS-NOT: bir.memloc @acc :

builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 384] float32
    bir.memloc @tiled : psum [128, 4, 128] float32
    bir.memloc @acc : psum [128, 4, 384] float32
    bir.tensor_copy dst @tiled[128 : [512, 128], [1, 128]], src @x[0 : [384, 128], [1, 128]] {id = 0 : i64, engine = "dve"}
    bir.tensor_copy dst @acc[0 : [1536, 128], [1, 384]], src @x[0 : [384, 128], [1, 384]] {id = 1 : i64, engine = "dve"}
    bir.tensor_copy dst @acc[384 : [1536, 128], [1, 384]], src @x[0 : [384, 128], [1, 384]] {id = 2 : i64, engine = "dve"}
  }
}
