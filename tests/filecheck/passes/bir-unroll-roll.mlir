// RUN: nkic-opt %s -p 'bir-unroll{roll=true}' | filecheck %s
// RUN: nkic-opt %s -p 'bir-unroll{roll=true},resolve-psum-accumulate,allocate-memory,assign-engines,dependency-analysis,schedule-instructions,insert-semaphores,bir-verify,bir-to-isa,isa-verify' | filecheck %s --check-prefix=ISA
// RUN: nkic-opt %s -p bir-unroll | filecheck %s --check-prefix=OFF
// RUN: not nkic-opt %s -p 'bir-unroll{roll=true max-instructions=10}' 2>&1 | filecheck %s --check-prefix=LIMIT

// The k-loop of a matmul stays one body: its first iteration is peeled (the implicit accumulate: the peeled matmul
// overwrites the PSUM tile, the rolled one accumulates), then the runtime-loop control sequence with the index in r1
// (counting 0, 1, ... from iteration 1) and the condition in r2. Operands that move with the loop get the register
// term (+ c*r1) with their first rolled iteration's address as the static offset; the tiles allocated in the body
// are one memloc each (the peeled copy has its own). Loop "L2" moves a slice across partitions: it cannot roll
// and unrolls.
// CHECK: bir.memloc @a.1 : sbuf [128, 128] float32
// CHECK-NEXT: bir.memloc @a : sbuf [128, 128] float32
// CHECK: bir.dma_copy dst @a.1[0 : [128, 128], [1, 128]], src @lhs[16384 : [128, 128], [1, 128]] {id = 0 : i64, engine = "sp"}
// CHECK-NEXT: bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @a.1[{{.*}}], moving @b[{{.*}}] {id = 1 : i64, engine = "pe"}
// CHECK-NEXT: bir.register_alu {id = 2 : i64, engine = "unassigned", dst_reg = 1 : i64, op = "bypass"}
// CHECK-NEXT: bir.register_alu {id = 3 : i64, engine = "unassigned", dst_reg = 2 : i64, op = "less", src0_reg = 1 : i64, imm1 = 2 : i64}
// CHECK-NEXT: bir.loop_begin {id = 4 : i64, engine = "unassigned", cond_reg = 2 : i64}
// CHECK-NEXT: bir.dma_copy dst @a[0 : [128, 128], [1, 128]], src @lhs[32768 : [128, 128], [1, 128] + 16384*r1] {id = 5 : i64, engine = "sp"}
// CHECK-NEXT: bir.matmul dst @acc[0 : [512, 128], [1, 512]], stationary @a[{{.*}}], moving @b[{{.*}}] {id = 6 : i64, engine = "pe"}
// CHECK-NEXT: bir.register_alu {id = 7 : i64, engine = "unassigned", dst_reg = 1 : i64, op = "add", src0_reg = 1 : i64, imm1 = 1 : i64}
// CHECK-NEXT: bir.register_alu {id = 8 : i64, engine = "unassigned", dst_reg = 2 : i64, op = "less", src0_reg = 1 : i64, imm1 = 2 : i64}
// CHECK-NEXT: bir.loop_end {id = 9 : i64, engine = "unassigned", cond_reg = 2 : i64}
// CHECK-NEXT: bir.tensor_copy dst @c[0 : [128, 32], [1, 128]], src @c[0 : [128, 32], [1, 128]] {id = 10 : i64, engine = "dve"}
// CHECK-NEXT: bir.tensor_copy dst @c[4096 : [128, 32], [1, 128]], src @c[4096 : [128, 32], [1, 128]] {id = 11 : i64, engine = "dve"}
// CHECK-NOT: bir.loop

// At the ISA level the control sequence is in every engine's stream; the rolled DMA reads hbm + 16384*r1 elements.
// ISA: isa.stream "pe" {
// ISA: isa_pe.loop_begin {id = 4 : i64, cond_reg = 2 : i64}
// ISA-NEXT: isa_pe.matmul {{.*}}accumulate = true
// ISA-NEXT: isa_pe.reg_alu {id = 7 : i64, dst_reg = 1 : i64, op = "add", src0_reg = 1 : i64, imm1 = 1 : i64}
// ISA: isa.stream "sp" {
// ISA: isa_sp.loop_begin {id = 4 : i64, cond_reg = 2 : i64}
// ISA-NEXT: isa_sp.dma_copy dst sbuf({{.*}}]], src hbm(var 0, 0x20000, float32)[0 : [128, 128], [1, 128] + 16384*r1] {id = 5 : i64
// ISA-NEXT: isa_sp.reg_alu {id = 7

// OFF: bir.matmul
// OFF-NEXT: bir.dma_copy
// OFF-NOT: bir.loop_begin

// LIMIT: @f unrolls to at least 11 instructions with loops rolled, over the limit of 10

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
