// RUN: nkic-opt %s -p 'bir-unroll{roll=true}' | filecheck %s
// RUN: nkic-opt %s -p 'nkic-backend{roll_loops=true}' | filecheck %s --check-prefix=ISA
// RUN: nkic-opt %s -p 'bir-unroll{roll=true interleave=2},allocate-memory,dependency-analysis' | filecheck %s --check-prefix=IL

// @f: the outer loop moves the row tile (i0), the inner one the column half (i1); no operand moves with both, so
// both roll, nested: the outer counts in r1 (depth 0), the inner in r2 (depth 1), reset at each entry.
// CHECK-LABEL: bir.function @f
// CHECK: bir.counted_loop_begin {id = 0 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 4 : i64}
// CHECK-NEXT: bir.dma_copy dst @t[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512] + 65536*r1] {id = 1 : i64, engine = "sp"}
// CHECK-NEXT: bir.counted_loop_begin {id = 2 : i64, engine = "unassigned", iv_reg = 2 : i64, bound = 2 : i64}
// CHECK-NEXT: bir.tensor_copy dst @u[0 : [512, 128], [1, 256] + 256*r2], src @t[0 : [512, 128], [1, 256] + 256*r2] {id = 3 : i64, engine = "dve"}
// CHECK-NEXT: bir.counted_loop_end {id = 4 : i64, engine = "unassigned", iv_reg = 2 : i64, step = 1 : i64, bound = 2 : i64}
// CHECK-NEXT: bir.dma_copy dst @out[0 : [512, 128], [1, 512] + 65536*r1], src @u[0 : [512, 128], [1, 512]] {id = 5 : i64, engine = "sp"}
// CHECK-NEXT: bir.counted_loop_end {id = 6 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 1 : i64, bound = 4 : i64}

// In every engine's stream, balanced and nested the same way.
// ISA: isa.stream "dve" {
// ISA-NEXT: isa_dve.counted_loop_begin {id = 0 : i64, iv_reg = 1 : i64, bound = 4 : i64}
// ISA-NEXT: isa_dve.counted_loop_begin {id = 2 : i64, iv_reg = 2 : i64, bound = 2 : i64}
// ISA-NEXT: isa_dve.tensor_copy {{.*}} + 256*r2], src {{.*}} + 256*r2]
// ISA-NEXT: isa_dve.counted_loop_end {id = 4 : i64, iv_reg = 2 : i64, step = 1 : i64, bound = 2 : i64}
// ISA-NEXT: isa_dve.counted_loop_end {id = 6 : i64, iv_reg = 1 : i64, step = 1 : i64, bound = 4 : i64}
// ISA: isa.stream "pool" {
// ISA-NEXT: isa_pool.counted_loop_begin {id = 0
// ISA-NEXT: isa_pool.counted_loop_begin {id = 2
// ISA-NEXT: isa_pool.counted_loop_end {id = 4
// ISA-NEXT: isa_pool.counted_loop_end {id = 6

// With interleave=2 a body holding an inner loop keeps one iteration (@f as above).
// IL-LABEL: bir.function @f
// IL: bir.counted_loop_begin {{.*}}iv_reg = 1 : i64, bound = 4 : i64}
// IL: bir.counted_loop_end {{.*}}iv_reg = 1 : i64, step = 1 : i64, bound = 4 : i64}

// @g: 5 iterations, two per rolled body: iteration 0 before the loop (its own @s.0), then iterations (1, 2) and
// (3, 4) with the counter stepping by 2; copy 1 has its own @s.u1. The two copies' writes of @w move with r1 by the
// same scale and are the only operands on @w in the stretch, so their static addresses decide: no edge between them.
// IL-LABEL: bir.function @g
// IL: bir.dma_copy dst @s.0[{{.*}}], src @b[0 : [64, 128], [1, 64]] {id = 0
// IL: bir.counted_loop_begin {id = 2 : i64, engine = "unassigned", iv_reg = 1 : i64, bound = 4 : i64}
// IL-NEXT: bir.dma_copy dst @s[{{.*}}], src @b[8192 : [64, 128], [1, 64] + 8192*r1] {id = 3
// IL-NEXT: bir.tensor_copy dst @w[64 : [320, 128], [1, 64] + 64*r1], src @s[{{.*}}] {id = 4 : i64, engine = "dve", deps = [#bir.dep<flow, 3>]}
// IL-NEXT: bir.dma_copy dst @s.u1[{{.*}}], src @b[16384 : [64, 128], [1, 64] + 8192*r1] {id = 5
// IL-NEXT: bir.tensor_copy dst @w[128 : [320, 128], [1, 64] + 64*r1], src @s.u1[{{.*}}] {id = 6 : i64, engine = "dve", deps = [#bir.dep<flow, 5>]}
// IL-NEXT: bir.counted_loop_end {id = 7 : i64, engine = "unassigned", iv_reg = 1 : i64, step = 2 : i64, bound = 4 : i64}

// @h: the body also reads @w at a static address, so a moving write may touch any of @w: copy 1's write is ordered
// after copy 0's write (output) and read (anti).
// IL-LABEL: bir.function @h
// IL: bir.counted_loop_begin
// IL: bir.tensor_copy dst @w[128 : [320, 128], [1, 64] + 64*r1], src @s.u1[{{.*}}] {id = 8 : i64, engine = "dve", deps = [#bir.dep<output, 5>, #bir.dep<anti, 6>, #bir.dep<flow, 7>]}

builtin.module {
  bir.function @f attributes {inputs = ["a"], outputs = ["out"]} {
    bir.memloc @a : shared_hbm [512, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [512, 512] float32 {kind = "output"}
    bir.memloc @t : sbuf [128, 512] float32 {scope = "L0"}
    bir.memloc @u : sbuf [128, 512] float32 {scope = "L0"}
    bir.loop "L0" "affine" 0 to 4 step 1 {
      bir.dma_copy dst @t[0 : [512, 128], [1, 512]], src @a[0 + 65536*i0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
      bir.loop "L1" "affine" 0 to 2 step 1 {
        bir.tensor_copy dst @u[0 + 256*i1 : [512, 128], [1, 256]], src @t[0 + 256*i1 : [512, 128], [1, 256]] {id = 1 : i64, engine = "dve"}
      }
      bir.dma_copy dst @out[0 + 65536*i0 : [512, 128], [1, 512]], src @u[0 : [512, 128], [1, 512]] {id = 2 : i64, engine = "sp"}
    }
  }
  bir.function @g attributes {inputs = ["b"], outputs = []} {
    bir.memloc @b : shared_hbm [640, 64] float32 {kind = "input"}
    bir.memloc @w : sbuf [128, 320] float32
    bir.memloc @s : sbuf [128, 64] float32 {scope = "L2"}
    bir.loop "L2" "affine" 0 to 5 step 1 {
      bir.dma_copy dst @s[0 : [64, 128], [1, 64]], src @b[0 + 8192*i0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "sp"}
      bir.tensor_copy dst @w[0 + 64*i0 : [320, 128], [1, 64]], src @s[0 : [64, 128], [1, 64]] {id = 1 : i64, engine = "dve"}
    }
    bir.tensor_copy dst @w[0 : [320, 128], [1, 64]], src @w[64 : [320, 128], [1, 64]] {id = 2 : i64, engine = "dve"}
  }
  bir.function @h attributes {inputs = ["b"], outputs = []} {
    bir.memloc @b : shared_hbm [640, 64] float32 {kind = "input"}
    bir.memloc @w : sbuf [128, 320] float32
    bir.memloc @y : sbuf [128, 64] float32
    bir.memloc @s : sbuf [128, 64] float32 {scope = "L2"}
    bir.loop "L2" "affine" 0 to 5 step 1 {
      bir.dma_copy dst @s[0 : [64, 128], [1, 64]], src @b[0 + 8192*i0 : [64, 128], [1, 64]] {id = 0 : i64, engine = "sp"}
      bir.tensor_copy dst @w[0 + 64*i0 : [320, 128], [1, 64]], src @s[0 : [64, 128], [1, 64]] {id = 1 : i64, engine = "dve"}
      bir.tensor_copy dst @y[0 : [64, 128], [1, 64]], src @w[0 : [320, 128], [1, 64]] {id = 2 : i64, engine = "act"}
    }
  }
}
