// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

// POOL has no PSUM port.
builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.tensor_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: 'src': engine pool cannot access PSUM

// -----

// PE writes only PSUM.
builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.matmul dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: 'dst': PE MATMUL dst must be in psum, got sbuf

// -----

// 512 float32 starting at 0x400 end at 0xc00: across the bank boundary at 0x800.
builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.matmul dst psum(p0, 0x400, float32)[0 : [1, 128], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: matmul dst bytes [0x400, 0xc00) cross a 2048-byte PSUM bank

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_copy dst sbuf(p100, 0x0, float32)[0 : [1, 64], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: 'dst': partitions 100..163 exceed the 128 partitions

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.memset dst psum(p0, 0x3000, float32)[0 : [1, 128], [1, 2048]] {id = 0 : i64, value = 0.000000e+00 : f32}
    }
  }
}
// CHECK: 'dst': bytes [0x3000, 0x5000) outside the 16384-byte psum partition

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, func = "exp"}
    }
  }
}
// CHECK: 'isa_act.activate' requires a 'src' operand

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, func = "expo"}
    }
  }
}
// CHECK: unknown activation function 'expo'

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, op = "plus"}
    }
  }
}
// CHECK: unknown ALU opcode 'plus'

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_dve.reciprocal dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: 'isa_dve.reciprocal' (engine dve) cannot be in the "act" stream

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src psum(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, queue = 0 : i64}
    }
  }
}
// CHECK: 'src': engine sp cannot access PSUM

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 3, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 7 : i64, queue = 0 : i64}
    }
  }
}
// CHECK: 'isa_sp.dma_copy' (id 7) 'src' uses undeclared var 3

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @a : input [128, 256] float32 {var_id = 0 : i64}
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 7 : i64, queue = 0 : i64}
    }
  }
}
// CHECK: 'isa_sp.dma_copy' (id 7) 'src' bytes [0x0, 0x40000) outside var 0 (131072 bytes)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, queue = 3 : i64, signal_sem = 8 : i64}
    }
  }
}
// CHECK: 'isa_sp.dma_copy' may only signal semaphore 11, not 8

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.sem_wait {id = 0 : i64}
    }
  }
}
// CHECK: 'isa_pe.sem_wait' requires wait_sem

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, wait_sem = 5 : i64, wait_value = 1 : i64}
    }
  }
}
// CHECK: wait_sem 5 is not an engine (0..4) or DMA queue (8..23) semaphore

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], operand0 sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 1]] {id = 0 : i64, op0 = "add", operand0 = 1.000000e+00 : f32}
    }
  }
}
// CHECK: 'operand0' is given both as a tensor and as an immediate

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.iota dst sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 64]], pattern sbuf(p0, 0x0, int32)[0 : [1, 128], [1, 64]] {id = 0 : i64}
    }
  }
}
// CHECK: 'pattern': only the 'pattern' slot is pattern-only (none), got sbuf

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 128], [1, 256]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: matmul shapes: stationary 128x128, moving 128x512, dst 128x256

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 64], [1, 512]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 64]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 512]] {id = 0 : i64, tile_row = 64 : i64, tile_rows = 64 : i64, tile_cols = 128 : i64}
    }
  }
}
// CHECK: matmul stationary [K=128, M=64] exceeds its PE tile of 64 rows x 128 columns

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.matmul dst psum(p0, 0x0, float32)[0 : [1, 32], [1, 512]], stationary sbuf(p0, 0x0, float8_e4m3)[0 : [1, 128], [1, 32]], moving sbuf(p0, 0x100, float8_e4m3)[0 : [1, 128], [1, 512]] {id = 0 : i64, double_row = true}
    }
  }
}
// CHECK: matmul shapes: stationary 128x32, moving 128x512, dst 32x512

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.tensor_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[5 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: 'src': ISA patterns have offset 0 and no loop terms (use the address)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
    }
    isa.stream "act" {
    }
  }
}
// CHECK: isa.core @sg00 has two 'act' streams

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @a : scratch [4] float32 {var_id = 0 : i64}
  }
}
// CHECK: unknown variable kind 'scratch'

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.range_select dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], on_true sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], bound0 sbuf(p0, 0x3000, float32)[0 : [1, 64], [1, 1]], bound1 sbuf(p0, 0x3004, float32)[0 : [1, 128], [1, 1]] {id = 0 : i64, comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.000000e+04 : f32}
    }
  }
}
// CHECK: 'bound0' must be a (128, 1) tile, got (64, 1)


// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.bn_aggr dst sbuf(p0, 0x3100, float32)[0 : [1, 128], [1, 2]], src sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 5]] {id = 0 : i64}
    }
  }
}
// CHECK: bn_aggr reads (count, mean, variance * count) triples of (128, 5) into (128, 2), not (128, 2)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.transpose dst psum(p0, 0x0, float32)[0 : [1, 64], [1, 128]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 32]] {id = 0 : i64}
    }
  }
}
// CHECK: transpose of (128, 32) (partitions, free) writes (32, 128), not (64, 128)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.set_rng_seed src sbuf(p0, 0x0, uint32)[0 : [1, 1], [1, 4]] {id = 0 : i64}
    }
  }
}
// CHECK: set_rng_seed reads one 32-bit seed: src_seeds must be [1, 1], got (1, 4) (partitions, free)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.dropout dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], prob sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 2]] {id = 0 : i64}
    }
  }
}
// CHECK: 'prob' must be a (128, 1) tile, got (128, 2)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.max8 dst sbuf(p0, 0x3000, float32)[0 : [1, 128], [1, 4]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: max8 of (128, 512) (partitions, free) writes (128, 8), not (128, 4)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.topk dst sbuf(p0, 0x5000, bfloat16)[0 : [1, 128], [1, 64]], idx_dst sbuf(p0, 0x5100, uint32)[0 : [1, 128], [1, 32]], src sbuf(p0, 0x6000, bfloat16)[0 : [1, 128], [1, 256]] {id = 0 : i64, n = 4000 : i64}
    }
  }
}
// CHECK: topk of (128, 256) (partitions, free) needs val_dst and idx_dst of (128, k), not (128, 64) and (128, 32)

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.local_gather dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 192]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], index sbuf(p0, 0x3000, uint16)[0 : [1, 128], [1, 4]] {id = 0 : i64, num_elem_per_idx = 3 : i64, num_valid_indices = 64 : i64}
    }
  }
}
// CHECK: num_elem_per_idx must be one of (1, 2, 4, 8, 16, 32), got 3

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.nc_n_gather dst sbuf(p0, 0x800, float32)[0 : [1, 64], [1, 16]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], indices sbuf(p0, 0x3000, uint32)[0 : [1, 64], [1, 16]] {id = 0 : i64}
    }
  }
}
// CHECK: nc_n_gather writes one element per index: dst (64, 16) must be indices (64, 16), data has 128 partitions

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.nc_stream_shuffle dst sbuf(p0, 0x800, float32)[0 : [1, 32], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 32], [1, 512]] {id = 0 : i64, mask0 = 40 : i64}
    }
  }
}
// CHECK: shuffle mask entries must be 0..31 or 255, got [40]

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.nc_stream_shuffle dst sbuf(p32, 0x800, float32)[0 : [1, 64], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]] {id = 0 : i64}
    }
  }
}
// CHECK: with 64 active partitions 'dst' must start at partition 0 or 64, not 32

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.dma_compute dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src0 hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]], src1 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 256]] {id = 0 : i64, queue = 0 : i64, reduce_op = "add"}
    }
  }
}
// CHECK: dma_compute needs equal element counts, got {'dst': 65536, 'src0': 65536, 'src1': 32768}

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.dma_compute dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src0 hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 0 : i64, queue = 16 : i64, reduce_op = "add"}
    }
  }
}
// CHECK: DMA queue 16 outside 0..15

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "act" {
      isa_act.activate2 dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, func = "exp", op0 = "bypass", op1 = "bypass", reduce_cmd = "reset_reduce"}
    }
  }
}
// CHECK: activate2: reduce_cmd=reset_reduce needs a reduce_op

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.sendrecv dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 0 : i64, send_to_rank = 2 : i64, recv_from_rank = 1 : i64}
    }
  }
}
// CHECK: sendrecv: send_to_rank must be 0 or 1 (a core of the LNC=2 pair), got 2

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.sendrecv dst sbuf(p0, 0x1000, bfloat16)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 512]] {id = 0 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64, gpsimd_dma = true}
    }
  }
}
// CHECK: sendrecv: dma_engine.gpsimd_dma moves at most 512 bytes per partition of a 2-byte dtype, got 1024

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.sendrecv dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 0 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64, gpsimd_dma = true}
    }
  }
}
// CHECK: sendrecv with gpsimd_dma runs on pool (GpSimd's own DMA), not sp

// -----

builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.sendrecv dst sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 0 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64}
    }
  }
}
// CHECK: sendrecv cannot cast: src is float32, dst is bfloat16

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @out : output [128, 64] float32 {var_id = 0 : i64}
    isa.stream "pool" {
      isa_pool.core_barrier data hbm(var 0, 0x0, float32)[0 : [64, 128], [1, 64]] {id = 0 : i64, core_mask = 5 : i64}
    }
  }
}
// CHECK: core_barrier: cores must be distinct ranks of the LNC=2 pair (0 and/or 1), got (0, 2)

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @a : input [128, 512] float32 {var_id = 0 : i64}
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 64], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 64], [1, 512] + 512*vector src_offset] {id = 0 : i64, queue = 0 : i64}
    }
  }
}
// CHECK: 'src': its vector dynamic offset names slot 'src_offset', which holds no index

// -----

// Every field fits its encoding (target/isa.py instr_encoding_problem, which the NEFF encoder also applies): an
// operand's pattern step is an int32, so isa-verify refuses what -t neff could not write.
builtin.module {
  isa.core @sg00 {
    isa.var @a : input [128, 512] float32 {var_id = 0 : i64}
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 128], [4294967296, 1], [1, 512]] {id = 0 : i64, queue = 0 : i64}
    }
  }
}
// CHECK: 'isa_sp.dma_copy' (id 0) cannot be encoded: pattern step = 4294967296 outside -2147483648..2147483647

// -----

builtin.module {
  isa.core @sg00 {
    isa.var @"a/b" : input [128, 512] float32 {var_id = 0 : i64}
  }
}
// CHECK: variable name 'a/b' is not a safe name

// -----

// DEBUG_PRINT is a DMA: only SP queues 0..15 carry it, and it signals its queue's semaphore.
builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.debug_print src sbuf(p0, 0x0, float32)[0 : [1, 3], [1, 4]] {id = 0 : i64, queue = 16 : i64, prefix = "a"}
    }
  }
}
// CHECK: DMA queue 16 outside 0..15

// -----

// It reads SBUF or HBM, never PSUM (SP's DMA has no PSUM port).
builtin.module {
  isa.core @sg00 {
    isa.stream "sp" {
      isa_sp.debug_print src psum(p0, 0x0, float32)[0 : [1, 3], [1, 4]] {id = 0 : i64, queue = 0 : i64, prefix = "a"}
    }
  }
}
// CHECK: 'src': engine sp cannot access PSUM


// -----

// Engine legality (target/instructions.py, from the NKI ISA reference): nisa.tensor_scalar's `engine` is
// "nki.isa.engine.gpsimd (only allowed for rsqrt)".
builtin.module {
  isa.core @sg00 {
    isa.stream "pool" {
      isa_pool.tensor_scalar dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, op0 = "multiply", operand0 = 2.000000e+00 : f32}
    }
  }
}
// CHECK: TENSOR_SCALAR cannot run on engine 'pool': nisa.tensor_scalar: POOL (GpSimdE) does not compute op0=multiply (it computes rsqrt)

// -----

// nisa.tensor_tensor: "nl.power. (Which runs on the GpSimd engine.)"
builtin.module {
  isa.core @sg00 {
    isa.stream "dve" {
      isa_dve.tensor_tensor dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], in1 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 0 : i64, op = "power"}
    }
  }
}
// CHECK: TENSOR_TENSOR cannot run on engine 'dve': nisa.tensor_tensor: DVE (VectorE) does not compute op=power

// -----

// TensorE reads only SBUF: "Tensor Engine nc_transpose must read the input tile from SBUF".
builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.transpose dst psum(p0, 0x0, float32)[0 : [1, 32], [1, 32]], src psum(p0, 0x800, float32)[0 : [1, 32], [1, 32]] {id = 0 : i64}
    }
  }
}
// CHECK: 'src': PE TRANSPOSE src must be in sbuf, got psum

// -----

// A matmul result has at most 8192 columns (NeuronCore-v4's bfloat16 result: the entire PSUM), whatever its bytes.
builtin.module {
  isa.core @sg00 {
    isa.stream "pe" {
      isa_pe.matmul dst psum(p0, 0x0, float8_e4m3)[0 : [1, 128], [1, 16384]], stationary sbuf(p0, 0x0, bfloat16)[0 : [1, 128], [1, 128]], moving sbuf(p0, 0x100, bfloat16)[0 : [1, 128], [1, 16384]] {id = 0 : i64}
    }
  }
}
// CHECK: matmul free size 16384 exceeds 8192
