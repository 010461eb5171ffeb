// RUN: nkic-opt %s -p 'bir-unroll{roll=true}' | filecheck %s
// RUN: nkic-opt %s -p 'nkic-backend{roll_loops=true}' | filecheck %s --check-prefix=ISA
// RUN: nkic-opt %s -p bir-unroll | filecheck %s --check-prefix=OFF
// RUN: not nkic-opt %s -p 'bir-unroll{roll=true max-instructions=6}' 2>&1 | filecheck %s --check-prefix=LIMIT

// The k-loop of a matmul stays one body: its first iteration is peeled (the implicit accumulate: the peeled matmul
// overwrites the PSUM tile, the rolled one accumulates), then a counted loop whose counter r1 runs 0, 1 below the
// bound 2 (iterations 2 and 3). Operands that move with the loop get the register term (+ c*r1) with their first
// rolled iteration's address as the static offset; the tiles allocated in the body are one memloc each (the peeled
// copy has its own). Loop "L2" moves a slice across partitions: it cannot roll and unrolls.
// CHECK: bir.memloc @a.1 : sbuf [128, 128] float32
// CHECK-NEXT: bir.memloc @a : sbuf [128, 128] float32
// CHECK-NEXT: bir.dma_copy dst @a.1[0 : [128, 128], [1, 128]], src @lhs[16384 : [128, 128], [1, 128]] {id = 0 : i64, engine = "sp"}
// CHECK-NEXT: bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @a.1[{{.*}}], moving @b[{{.*}}] {id = 1 : i64, engine = "pe"}
// CHECK-NEXT: bir.counted_loop_begin {id = 2 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: bir.dma_copy dst @a[0 : [128, 128], [1, 128]], src @lhs[32768 : [128, 128], [1, 128] + 16384*r1] {id = 3 : i64, engine = "sp"}
// CHECK-NEXT: bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @a[{{.*}}], moving @b[{{.*}}] {id = 4 : i64, engine = "pe"}
// CHECK-NEXT: bir.counted_loop_end {id = 5 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: bir.tensor_copy dst @c[0 : [128, 32], [1, 128]], src @c[0 : [128, 32], [1, 128]] {id = 6 : i64, engine = "dve"}
// CHECK-NEXT: bir.tensor_copy dst @c[4096 : [128, 32], [1, 128]], src @c[4096 : [128, 32], [1, 128]] {id = 7 : i64, engine = "dve"}
// CHECK-NOT: bir.loop

// At the ISA level the counted loop is in every engine's stream; the rolled DMA reads hbm + 16384*r1 elements and
// the rolled matmul accumulates.
// ISA: isa.stream "pe" {
// ISA: isa_pe.counted_loop_begin {id = 2 : i64, iv_reg = 1 : i64, bound = 2 : i64}
// ISA-NEXT: isa_pe.matmul {{.*}}accumulate = true
// ISA-NEXT: isa_pe.counted_loop_end {id = 5 : i64, iv_reg = 1 : i64, step = 1 : i64, bound = 2 : i64}
// ISA: isa.stream "sp" {
// ISA: isa_sp.counted_loop_begin {id = 2 : i64, iv_reg = 1 : i64, bound = 2 : i64}
// ISA-NEXT: isa_sp.dma_copy dst sbuf({{.*}}]], src hbm(var 0, 0x20000, float32)[0 : [128, 128], [1, 128] + 16384*r1] {id = 3 : i64
// ISA-NEXT: isa_sp.counted_loop_end {id = 5

// OFF: bir.matmul
// OFF-NEXT: bir.dma_copy
// OFF-NOT: bir.counted_loop_begin

// LIMIT: @f unrolls to at least 7 instructions with loops rolled, over the limit of 6

builtin.module {
  bir.function @f attributes {inputs = ["lhs"], outputs = []} {
    bir.memloc @lhs : shared_hbm [512, 128] float32 {kind = "input"}
    bir.memloc @acc : psum [128, 512] float32
    bir.memloc @b : sbuf [128, 512] float32 {address = array<i64: 0, 4096>}
    bir.memloc @c : sbuf [128, 128] float32
    bir.memloc @a : sbuf [128, 128] float32 {scope = "L0"}
    bir.loop "L0" "affine" 1 to 4 step 1 {
      bir.dma_copy dst @a[0 : [128, 128], [1, 128]], src @lhs[0 + 16384*i0 : [128, 128], [1, 128]] {id = 0 : i64, engine = "sp"}
      bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @a[0 : [128, 128], [1, 128]], moving @b[0 : [512, 128], [1, 512]] {id = 1 : i64, engine = "pe"}
    }
    bir.loop "L2" "affine" 0 to 2 step 1 {
      bir.tensor_copy dst @c[0 + 4096*i0 : [128, 32], [1, 128]], src @c[0 + 4096*i0 : [128, 32], [1, 128]] {id = 2 : i64, engine = "dve"}
    }
  }
}
