// RUN: nkic-opt %s -p 'dma-transpose{force=true}' --split-input-file | filecheck %s
// RUN: nkic-opt %s -p dma-transpose --split-input-file | filecheck %s --check-prefix=COST
// RUN: nkic-opt %s -p 'dma-transpose{scheduled=true}' --split-input-file | filecheck %s --check-prefix=COST

// PE is busy with 16 matmuls ahead of the two transposes (in engine order), DMA is idle: the transposes and the copy
// become ONE 3-D DMA transpose [q, 2, k] -> [k, 2, q] (the blocks step uniformly on both sides), in the copy's
// place with the copy's id; the store's edge on the copy stays on it; @p is gone. The cost model agrees (COST).
// CHECK-LABEL: bir.function @fires
// CHECK-NOT: bir.memloc @p :
// CHECK-NOT: bir.transpose
// CHECK: bir.dma_transpose dst @s[0 : [256, 128], [128, 2], [1, 128]], src @e[0 : [256, 128], [128, 2], [1, 128]] {id = 3 : i64, engine = "sp", deps = [#bir.dep<flow, 0>]}
// CHECK-NEXT: bir.dma_copy dst @out[{{.*}}], src @s[{{.*}}] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
// COST-LABEL: bir.function @fires
// COST-NOT: bir.transpose
// COST: bir.dma_transpose dst @s
builtin.module {
  bir.function @fires attributes {inputs = ["in", "w"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 256] bfloat16 {kind = "input"}
    bir.memloc @w : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 2, 128] bfloat16 {kind = "output"}
    bir.memloc @e : sbuf [128, 256] bfloat16
    bir.memloc @p : psum [128, 2, 128] bfloat16
    bir.memloc @s : sbuf [128, 2, 128] bfloat16
    bir.memloc @a : sbuf [128, 512] float32
    bir.memloc @m : psum [128, 512] float32
    bir.dma_copy dst @a[0 : [512, 128], [1, 512]], src @w[0 : [512, 128], [1, 512]] {id = 10 : i64, engine = "sp"}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 11 : i64, engine = "pe", deps = [#bir.dep<flow, 10>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 12 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 11>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 13 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 12>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 14 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 13>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 15 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 14>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 16 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 15>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 17 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 16>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 18 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 17>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 19 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 18>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 20 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 19>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 21 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 20>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 22 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 21>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 23 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 22>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 24 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 23>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 25 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 24>]}
    bir.matmul dst @m[0 : [512, 128], [1, 512]], stationary @a[0 : [512, 128], [1, 128]], moving @a[0 : [512, 128], [1, 512]] {id = 26 : i64, engine = "pe", deps = [#bir.dep<flow, 10>, #bir.dep<output, 25>]}
    bir.dma_copy dst @e[0 : [256, 128], [1, 256]], src @in[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.transpose dst @p[0 : [256, 128], [1, 128]], data @e[0 : [256, 128], [1, 128]] {id = 1 : i64, engine = "pe", deps = [#bir.dep<flow, 0>]}
    bir.transpose dst @p[128 : [256, 128], [1, 128]], data @e[128 : [256, 128], [1, 128]] {id = 2 : i64, engine = "pe", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 256]], src @p[0 : [256, 128], [1, 256]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [256, 128], [1, 256]], src @s[0 : [256, 128], [1, 256]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
  }
}

// -----

// The same group with nothing else on PE: the DMA's fixed start (~1.3 us) makes the result later than two short PE
// transposes and a copy, and PE is not a busy engine; the cost model keeps the PE transposes (COST). Forced, the
// rules allow the rewrite.
// CHECK-LABEL: bir.function @cost_says_no
// CHECK: bir.dma_transpose dst @s
// COST-LABEL: bir.function @cost_says_no
// COST: bir.transpose dst @p[0 :
// COST-NEXT: bir.transpose dst @p[128 :
// COST-NEXT: bir.tensor_copy dst @s
// COST-NOT: bir.dma_transpose
builtin.module {
  bir.function @cost_says_no attributes {inputs = ["in", "w"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 256] bfloat16 {kind = "input"}
    bir.memloc @w : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 2, 128] bfloat16 {kind = "output"}
    bir.memloc @e : sbuf [128, 256] bfloat16
    bir.memloc @p : psum [128, 2, 128] bfloat16
    bir.memloc @s : sbuf [128, 2, 128] bfloat16
    bir.dma_copy dst @e[0 : [256, 128], [1, 256]], src @in[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.transpose dst @p[0 : [256, 128], [1, 128]], data @e[0 : [256, 128], [1, 128]] {id = 1 : i64, engine = "pe", deps = [#bir.dep<flow, 0>]}
    bir.transpose dst @p[128 : [256, 128], [1, 128]], data @e[128 : [256, 128], [1, 128]] {id = 2 : i64, engine = "pe", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 256]], src @p[0 : [256, 128], [1, 256]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [256, 128], [1, 256]], src @s[0 : [256, 128], [1, 256]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
  }
}

// -----

// P has another reader (the activation): the copy is not P's only consumer, nothing changes even when forced.
// CHECK-LABEL: bir.function @other_reader
// CHECK: bir.transpose dst @p[0 :
// CHECK: bir.tensor_copy dst @s
// CHECK-NOT: bir.dma_transpose
builtin.module {
  bir.function @other_reader attributes {inputs = ["in", "w"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 256] bfloat16 {kind = "input"}
    bir.memloc @w : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 2, 128] bfloat16 {kind = "output"}
    bir.memloc @e : sbuf [128, 256] bfloat16
    bir.memloc @p : psum [128, 2, 128] bfloat16
    bir.memloc @s : sbuf [128, 2, 128] bfloat16
    bir.memloc @t : sbuf [128, 2, 128] bfloat16
    bir.dma_copy dst @e[0 : [256, 128], [1, 256]], src @in[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.transpose dst @p[0 : [256, 128], [1, 128]], data @e[0 : [256, 128], [1, 128]] {id = 1 : i64, engine = "pe", deps = [#bir.dep<flow, 0>]}
    bir.transpose dst @p[128 : [256, 128], [1, 128]], data @e[128 : [256, 128], [1, 128]] {id = 2 : i64, engine = "pe", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 256]], src @p[0 : [256, 128], [1, 256]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [256, 128], [1, 256]], src @s[0 : [256, 128], [1, 256]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
    bir.activation dst @t[0 : [256, 128], [1, 256]], data @p[0 : [256, 128], [1, 256]] {id = 5 : i64, engine = "act", func = "exp", deps = [#bir.dep<flow, 2>]}
  }
}

// -----

// fp32: a DMA transpose takes 2-byte dtypes only (nki.isa.dma_transpose); nothing changes even when forced.
// CHECK-LABEL: bir.function @four_bytes
// CHECK: bir.transpose dst @p[0 :
// CHECK: bir.tensor_copy dst @s
// CHECK-NOT: bir.dma_transpose
builtin.module {
  bir.function @four_bytes attributes {inputs = ["in", "w"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 256] float32 {kind = "input"}
    bir.memloc @w : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 2, 128] float32 {kind = "output"}
    bir.memloc @e : sbuf [128, 256] float32
    bir.memloc @p : psum [128, 2, 128] float32
    bir.memloc @s : sbuf [128, 2, 128] float32
    bir.dma_copy dst @e[0 : [256, 128], [1, 256]], src @in[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.transpose dst @p[0 : [256, 128], [1, 128]], data @e[0 : [256, 128], [1, 128]] {id = 1 : i64, engine = "pe", deps = [#bir.dep<flow, 0>]}
    bir.transpose dst @p[128 : [256, 128], [1, 128]], data @e[128 : [256, 128], [1, 128]] {id = 2 : i64, engine = "pe", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 256]], src @p[0 : [256, 128], [1, 256]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [256, 128], [1, 256]], src @s[0 : [256, 128], [1, 256]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
  }
}

// -----

// The copy reads only block 0 of P, but transpose 2 writes block 1: on S that write would land where the copy
// leaves S alone; nothing changes even when forced.
// CHECK-LABEL: bir.function @partial_copy
// CHECK: bir.transpose dst @p[0 :
// CHECK-NOT: bir.dma_transpose
builtin.module {
  bir.function @partial_copy attributes {inputs = ["in", "w"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 256] bfloat16 {kind = "input"}
    bir.memloc @w : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 2, 128] bfloat16 {kind = "output"}
    bir.memloc @e : sbuf [128, 256] bfloat16
    bir.memloc @p : psum [128, 2, 128] bfloat16
    bir.memloc @s : sbuf [128, 2, 128] bfloat16
    bir.dma_copy dst @e[0 : [256, 128], [1, 256]], src @in[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.transpose dst @p[0 : [256, 128], [1, 128]], data @e[0 : [256, 128], [1, 128]] {id = 1 : i64, engine = "pe", deps = [#bir.dep<flow, 0>]}
    bir.transpose dst @p[128 : [256, 128], [1, 128]], data @e[128 : [256, 128], [1, 128]] {id = 2 : i64, engine = "pe", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 128]], src @p[0 : [256, 128], [1, 128]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [256, 128], [1, 256]], src @s[0 : [256, 128], [1, 256]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
  }
}

// -----

// The memset rewrites @e's second block between the transposes and the copy: a DMA at the copy's place would read
// the new values; nothing changes even when forced.
// CHECK-LABEL: bir.function @source_overwritten
// CHECK: bir.transpose dst @p[0 :
// CHECK-NOT: bir.dma_transpose

builtin.module {
  bir.function @source_overwritten attributes {inputs = ["in", "w"], outputs = ["out"]} {
    bir.memloc @in : shared_hbm [128, 256] bfloat16 {kind = "input"}
    bir.memloc @w : shared_hbm [128, 512] float32 {kind = "input"}
    bir.memloc @out : shared_hbm [128, 2, 128] bfloat16 {kind = "output"}
    bir.memloc @e : sbuf [128, 256] bfloat16
    bir.memloc @p : psum [128, 2, 128] bfloat16
    bir.memloc @s : sbuf [128, 2, 128] bfloat16
    bir.dma_copy dst @e[0 : [256, 128], [1, 256]], src @in[0 : [256, 128], [1, 256]] {id = 0 : i64, engine = "sp"}
    bir.transpose dst @p[0 : [256, 128], [1, 128]], data @e[0 : [256, 128], [1, 128]] {id = 1 : i64, engine = "pe", deps = [#bir.dep<flow, 0>]}
    bir.transpose dst @p[128 : [256, 128], [1, 128]], data @e[128 : [256, 128], [1, 128]] {id = 2 : i64, engine = "pe", deps = [#bir.dep<flow, 0>, #bir.dep<output, 1>]}
    bir.memset dst @e[128 : [256, 128], [1, 128]] {id = 5 : i64, engine = "dve", value = 0.0 : f32, deps = [#bir.dep<anti, 2>]}
    bir.tensor_copy dst @s[0 : [256, 128], [1, 256]], src @p[0 : [256, 128], [1, 256]] {id = 3 : i64, engine = "dve", deps = [#bir.dep<flow, 2>]}
    bir.dma_copy dst @out[0 : [256, 128], [1, 256]], src @s[0 : [256, 128], [1, 256]] {id = 4 : i64, engine = "sp", deps = [#bir.dep<flow, 3>]}
  }
}
