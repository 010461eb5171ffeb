// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 256x512xf32>
    penguin.return
  }
}
// CHECK: partition dimension 256 exceeds the architecture limit of 128

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<psum, 128x8192xf32>
    penguin.return
  }
}
// CHECK: PSUM tensor needs 32768 bytes per partition, PSUM has 16384

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.matmul dst %x[0 : [128, 128], [1, 128]], stationary %x[0 : [128, 128], [1, 128]], moving %x[0 : [128, 128], [1, 128]]
    penguin.return
  }
}
// CHECK: nc_matmul: 'dst' must be in PSUM, not sbuf (the NKI reference: "The nc_matmul instruction must read inputs from SBUF and write outputs to PSUM.")

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 128]], data1 %x[0 : [128, 128], [1, 128]], data2 %x[0 : [128, 128], [1, 128]] {op = "plus"}
    penguin.return
  }
}
// CHECK: unknown ALU opcode 'plus'

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 128]], data1 %x[0 : [128, 128], [1, 128]] {op = "add"}
    penguin.return
  }
}
// CHECK: 'penguin.tensor_tensor' requires a 'data2' operand

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_tensor data1 %x[0 : [128, 128], [1, 128]], dst %x[0 : [128, 128], [1, 128]], data2 %x[0 : [128, 128], [1, 128]] {op = "add"}
    penguin.return
  }
}
// CHECK: operand roles must appear in the order dst, data1, data2

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 128]], data1 %x[0 : [128, 64], [1, 256]], data2 %x[0 : [128, 128], [1, 128]] {op = "add"}
    penguin.return
  }
}
// CHECK: partition counts differ: dst has 128, data1 has 64

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.dma_copy dst %x[0 : [128, 128], [1, 128]], src %x[0 : [128, 64], [1, 128]]
    penguin.return
  }
}
// CHECK: dma_copy element counts differ: dst 16384, src 8192

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xbf16>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x16384xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x16384xf8E4M3FN>
    penguin.matmul dst %p[0 : [16384, 128], [1, 16384]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [16384, 128], [1, 16384]]
    penguin.return
  }
}
// CHECK: matmul limits exceeded: K=128 (<=128), M=128 (<=128), N=16384 (<=8192)

// -----

// The moving free size per generation is the documented rule's: 512 columns on NeuronCore-v3 (v4: 4096 for a
// float32 result, 8192 for a bfloat16 one).
builtin.module attributes {nkic.target = "gen3"} {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xbf16>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x1024xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x1024xf32>
    penguin.matmul dst %p[0 : [1024, 128], [1, 1024]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [1024, 128], [1, 1024]]
    penguin.return
  }
}
// CHECK: nc_matmul: matmul limits exceeded on gen3: K=128 (max 128), M=128 (max 128), N=1024 (max 512) on NeuronCore-v3

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x8192xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
    penguin.matmul dst %p[0 : [512, 128], [1, 512]], stationary %w[0 : [128, 128], [1, 128]], moving %x[0 : [8192, 128], [1, 512]] {tile_row = 0 : i64, tile_col = 0 : i64, tile_rows = 128 : i64, tile_cols = 64 : i64}
    penguin.return
  }
}
// CHECK: matmul stationary [K=128, M=128] exceeds its PE tile of 128 rows x 64 columns

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x8192xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
    penguin.matmul dst %p[0 : [512, 32], [1, 512]], stationary %w[0 : [128, 128], [1, 32]], moving %x[0 : [8192, 128], [1, 512]] {tile_row = 0 : i64, tile_col = 48 : i64, tile_rows = 128 : i64, tile_cols = 32 : i64}
    penguin.return
  }
}
// CHECK: matmul tile_position (0, 48) must be multiples of tile_size (128, 32) inside the array

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x8192xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
    penguin.matmul dst %p[0 : [512, 32], [1, 512]], stationary %w[0 : [128, 128], [1, 32]], moving %x[0 : [8192, 128], [1, 512]] {tile_rows = 128 : i64, tile_cols = 48 : i64}
    penguin.return
  }
}
// CHECK: matmul tile_size (128, 48) must be made of (32, 64, 128)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x8192xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
    penguin.matmul dst %p[0 : [512, 32], [1, 256]], stationary %x[0 : [8192, 128], [256, 2], [1, 32]], moving %x[0 : [8192, 128], [256, 2], [1, 256]] {double_row = true, tile_rows = 128 : i64, tile_cols = 32 : i64}
    penguin.return
  }
}
// CHECK: matmul double_row mode cannot be combined with column tiling

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<sbuf, 128x128xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x8192xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
    penguin.matmul dst %p[0 : [512, 64], [1, 256]], stationary %x[0 : [8192, 128], [1, 128]], moving %x[0 : [8192, 128], [1, 512]] {double_row = true}
    penguin.return
  }
}
// CHECK: matmul double_row operands must be [K, 2, ...]

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_copy dst %x[0 : [128, 128], [1, 128]], src %x[0 + 1*i0 : [128, 128], [1, 128]]
    penguin.return
  }
}
// CHECK: src access pattern uses i0 outside its loop

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.activation dst %x[0 : [128, 128], [1, 128]], data %x[0 : [128, 128], [1, 128]] {func = "expo"}
    penguin.return
  }
}
// CHECK: unknown activation function 'expo'

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.activation dst %x[0 : [128, 128], [1, 128]], data %x[0 : [128, 128], [1, 128]], bias %x[0 : [128, 128], [0, 1]] {func = "exp", bias = 1.0 : f32}
    penguin.return
  }
}
// CHECK: 'bias' is given both as a tensor and as an immediate

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<psum, 128x128xf32>
    %y = penguin.alloc "y" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 128]], data1 %x[0 : [128, 128], [1, 128]], data2 %y[0 : [128, 128], [1, 128]] {op = "add", engine = "gpsimd"}
    penguin.return
  }
}
// CHECK: tensor_tensor on gpsimd cannot access psum

// -----

builtin.module {
  penguin.kernel @k : () -> (!penguin.tensor<sbuf, 128x128xf32>) program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.return %x : !penguin.tensor<sbuf, 128x128xf32>
  }
}
// CHECK: The input and output tensor of a NKI kernel must be in shared_hbm address space

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %b = penguin.alloc "b" : !penguin.tensor<sbuf, 128x2xf32>
    penguin.range_select dst %x[0 : [512, 128], [1, 512]], on_true %x[0 : [512, 128], [1, 512]], bound0 %b[0 : [2, 128], [1, 2]], bound1 %b[0 : [2, 128], [1, 1]] {comp_op0 = "greater_equal", comp_op1 = "less", on_false_value = -3.4028235e38 : f32}
    penguin.return
  }
}
// CHECK: 'bound0' must be a (128, 1) tile, got (128, 2)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %b = penguin.alloc "b" : !penguin.tensor<sbuf, 128x1xf32>
    penguin.range_select dst %x[0 : [512, 128], [1, 512]], on_true %x[0 : [512, 128], [1, 512]], bound0 %b[0 : [1, 128], [1, 1]], bound1 %b[0 : [1, 128], [1, 1]] {comp_op0 = "fuse", comp_op1 = "less", on_false_value = -3.4028235e38 : f32}
    penguin.return
  }
}
// CHECK: unknown ALU opcode 'fuse'

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %b = penguin.alloc "b" : !penguin.tensor<sbuf, 128x4xf32>
    penguin.bn_stats dst %b[0 : [4, 128], [1, 4]], data %x[0 : [512, 128], [1, 512]]
    penguin.return
  }
}
// CHECK: bn_stats of (128, 512) (partitions, free) writes (128, 6), not (128, 4)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %s = penguin.alloc "s" : !penguin.tensor<sbuf, 2x1xi32>
    penguin.set_rng_seed src_seeds %s[0 : [1, 2], [1, 1]]
    penguin.return
  }
}
// CHECK: set_rng_seed reads one 32-bit seed: src_seeds must be [1, 1], got (2, 1) (partitions, free)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x4xf32>
    %e = penguin.alloc "e" : !penguin.tensor<sbuf, 128x8xf32>
    penguin.max8 dst %e[0 : [8, 128], [1, 8]], src %x[0 : [4, 128], [1, 4]]
    penguin.return
  }
}
// CHECK: max8's src has 4 elements per partition, not between 8 and 16384

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %e = penguin.alloc "e" : !penguin.tensor<sbuf, 128x8xf32>
    penguin.find_index8 dst %e[0 : [8, 128], [1, 8]], data %x[0 : [512, 128], [1, 512]], vals %x[0 : [512, 128], [1, 4]]
    penguin.return
  }
}
// CHECK: nc_find_index8 over (128, 512) (partitions, free) needs vals (128, 8), not (128, 4)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %e = penguin.alloc "e" : !penguin.tensor<sbuf, 128x8xf32>
    penguin.match_replace8 dst %x[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]], vals %e[0 : [8, 128], [1, 8]], dst_idx %e[0 : [8, 64], [1, 8]] {imm = 0.0 : f32}
    penguin.return
  }
}
// CHECK: nc_match_replace8 over (128, 512) (partitions, free) needs dst_idx (128, 8), not (64, 8)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %n = penguin.alloc "n" : !penguin.tensor<sbuf, 128x512xi32>
    penguin.nonzero_with_count dst %n[0 : [512, 128], [1, 512]], src %x[0 : [512, 128], [1, 512]]
    penguin.return
  }
}
// CHECK: nonzero_with_count of (128, 512) (partitions, free) writes (128, 513) (count last), not (128, 512)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %t = penguin.alloc "t" : !penguin.tensor<sbuf, 128x40xbf16>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x40xui32>
    penguin.topk val_dst %t[0 : [40, 24], [1, 8]], idx_dst %i[0 : [40, 24], [1, 8]], src %t[0 : [40, 24], [1, 40]] {n = 600 : i64}
    penguin.return
  }
}
// CHECK: topk works on groups of 16 partitions, src has 24

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 24x4xui16>
    penguin.local_gather dst %x[0 : [512, 24], [1, 64]], src_buffer %x[0 : [512, 24], [1, 512]], index %i[0 : [4, 24], [1, 4]] {num_valid_indices = 64 : i64}
    penguin.return
  }
}
// CHECK: local_gather needs src_buffer, index and dst on the same number of partitions, a multiple of 16, got 24, 24 and 24

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x4xui16>
    penguin.local_gather dst %x[0 : [512, 128], [1, 64]], src_buffer %x[0 : [512, 128], [1, 512]], index %i[0 : [4, 128], [1, 4]] {num_elem_per_idx = 2 : i64, num_valid_indices = 64 : i64}
    penguin.return
  }
}
// CHECK: local_gather of 64 indices x 2 elements writes 128 elements per partition, dst has 64

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x16xui32>
    penguin.nc_n_gather dst %x[0 : [512, 128], [1, 8]], data %x[0 : [512, 128], [1, 512]], indices %i[0 : [16, 128], [1, 16]]
    penguin.return
  }
}
// CHECK: nc_n_gather writes one element per index: dst (128, 8) must be indices (128, 16), data has 128 partitions

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    penguin.nc_stream_shuffle dst %x[0 : [512, 32], [1, 512]], src %x[0 : [512, 32], [1, 512]] {shuffle_mask = array<i64: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 32>}
    penguin.return
  }
}
// CHECK: shuffle_mask entries must be 0..31 or 255, got [32]

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    penguin.nc_stream_shuffle dst %x[0 : [512, 32], [1, 256]], src %x[0 : [512, 32], [1, 512]] {shuffle_mask = array<i64: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31>}
    penguin.return
  }
}
// CHECK: nc_stream_shuffle moves whole partitions: dst (32, 256) and src (32, 512) need equal free sizes

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %s = penguin.alloc "s" : !penguin.tensor<sbuf, 1x64xi32>
    %b = penguin.alloc "b" : !penguin.tensor<sbuf, 1x2x32xi32>
    penguin.sequence_bounds dst %b[0 : [64, 1], [32, 2], [1, 32]], segment_ids %s[0 : [64, 1], [1, 64]]
    penguin.return
  }
}
// CHECK: sequence_bounds of segment_ids (1, 64) (one partition) writes (1, 2 x 64) = (1, 128), not (1, 64)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x512xf32>
    %h = penguin.alloc "h" : !penguin.tensor<shared_hbm, 128x256xf32>
    penguin.dma_compute dst %x[0 : [512, 128], [1, 512]], src0 %h[0 : [256, 128], [1, 256]], src1 %x[0 : [512, 128], [1, 512]] {reduce_op = "add"}
    penguin.return
  }
}
// CHECK: dma_compute needs equal element counts, got {'dst': 65536, 'src0': 32768, 'src1': 65536}

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.activate2 dst %x[0 : [128, 128], [1, 128]], data %x[0 : [128, 128], [1, 128]] {func = "exp", op0 = "add", op1 = "add", imm0 = 1.0 : f32, imm1 = 2.0 : f32}
    penguin.return
  }
}
// CHECK: activate2: (op0, op1) = (add, add) is not one of

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %xh = penguin.alloc "xh" : !penguin.tensor<sbuf, 16x512xbf16>
    %q = penguin.alloc "q" : !penguin.tensor<sbuf, 16x128xvector<4xf8E4M3FN>>
    %qs = penguin.alloc "qs" : !penguin.tensor<sbuf, 2x128xf8E8M0FNU>
    penguin.quantize_mx dst %q[0 : [128, 16], [1, 128]], src %xh[0 : [512, 16], [1, 512]], dst_scale %qs[0 : [128, 2], [1, 128]]
    penguin.return
  }
}
// CHECK: the partition dimension size of src must be a multiple of 32 and at most 128, got 16

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x512xf32>
    %q = penguin.alloc "q" : !penguin.tensor<sbuf, 64x128xvector<4xf8E4M3FN>>
    %qs = penguin.alloc "qs" : !penguin.tensor<sbuf, 8x128xf8E8M0FNU>
    penguin.matmul_mx dst %p[0 : [512, 128], [1, 128]], stationary %q[0 : [128, 64], [1, 128]], moving %q[0 : [128, 64], [1, 128]], stationary_scale %qs[0 : [128, 8], [1, 128]], moving_scale %qs[0 : [128, 8], [1, 128]]
    penguin.return
  }
}
// CHECK: stationary_scale (8, 128) (partitions, free) must have 128 elements per partition (one scale per packed element of stationary) and span at least 36 partitions for 64 data partitions

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x64xf32>
    penguin.sendrecv dst %x[0 : [64, 128], [1, 32]], src %x[32 : [64, 128], [1, 32]] {send_to_rank = 1 : i64, recv_from_rank = -1 : i64, pipe_id = 0 : i64}
    penguin.return
  }
}
// CHECK: sendrecv: recv_from_rank must be 0 or 1 (a core of the LNC=2 pair), got -1

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %o = penguin.alloc "o" : !penguin.tensor<shared_hbm, 128x64xf32>
    penguin.core_barrier data %o[0 : [64, 128], [1, 64]] {cores = array<i64: 1, 1>}
    penguin.return
  }
}
// CHECK: core_barrier: cores must be distinct ranks of the LNC=2 pair (0 and/or 1), got (1, 1)

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    %h = penguin.alloc "h" : !penguin.tensor<shared_hbm, 256x128xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 64x1xi32>
    penguin.dma_copy dst %x[0 : [128, 128], [1, 128]], src %h[0 : [128, 128], [1, 128] + 128*vector src_offset], src_offset %i[0 : [1, 64], [1, 1]]
    penguin.return
  }
}
// CHECK: 'src': a vector offset needs 128 indices, 'src_offset' has 64

// -----

builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_copy dst %x[0 : [128, 128], [1, 128]], src %x[0 : [128, 128], [1, 64] + 1*r2]
    penguin.return
  }
}
// CHECK: 'src' of penguin.tensor_copy cannot have a dynamic (reg) offset

// -----

// nl.device_print reads SBUF or HBM ("Can be in SBUF or HBM"): a PSUM tile is refused.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x128xf32>
    penguin.device_print src %p[0 : [128, 128], [1, 128]] {prefix = "p:"}
    penguin.return
  }
}
// CHECK: device_print src cannot be in psum (allowed: sbuf, hbm, shared_hbm, private_hbm)

// -----

// The prefix is a required string.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.device_print src %x[0 : [128, 128], [1, 128]] {prefix = 3 : i64}
    penguin.return
  }
}
// CHECK: should be of base attribute string


// -----

// The documented rules (nkic.target.rules) hold in IR text too: tensor_tensor cannot read two PSUM tiles.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x128xf32>
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 128]], data1 %p[0 : [128, 128], [1, 128]], data2 %p[0 : [128, 128], [1, 128]] {op = "add"}
    penguin.return
  }
}
// CHECK: tensor_tensor: data1 and data2 cannot both be in PSUM (the NKI reference: "However, the two input tiles, data1 and data2 cannot both reside in PSUM.")

// -----

// A float32 operand needs a float32 partner on every generation.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x128xf32>
    %a = penguin.alloc "a" : !penguin.tensor<sbuf, 128x128xf32>
    %b = penguin.alloc "b" : !penguin.tensor<sbuf, 128x128xbf16>
    penguin.matmul dst %p[0 : [128, 128], [1, 128]], stationary %a[0 : [128, 128], [1, 128]], moving %b[0 : [128, 128], [1, 128]]
    penguin.return
  }
}
// CHECK: nc_matmul: stationary is float32 and moving is bfloat16; a tfloat32/float32 operand needs a tfloat32/float32 partner

// -----

// A module that names its generation gets that generation's rules too: a bf16 matmul result is not allowed on
// trn2 (NeuronCore-v3).
builtin.module attributes {nkic.target = "gen3"} {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x128xbf16>
    %a = penguin.alloc "a" : !penguin.tensor<sbuf, 128x128xbf16>
    penguin.matmul dst %p[0 : [128, 128], [1, 128]], stationary %a[0 : [128, 128], [1, 128]], moving %a[0 : [128, 128], [1, 128]]
    penguin.return
  }
}
// CHECK: nc_matmul: the PSUM result 'dst' is bfloat16, it must be float32 on NeuronCore-v3

// -----

// A documented memory rule names its sentence in IR text too (before the declaration's generic memory check).
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %w = penguin.alloc "w" : !penguin.tensor<psum, 128x128xi32>
    penguin.iota dst %w[0 : [128, 128], [1, 128]] {pattern = #nkic.ap<0 : [1, 128]>, channel_multiplier = -1 : i64}
    penguin.return
  }
}
// CHECK: iota: 'dst' must be in SBUF, not psum (the NKI reference: "The output dst tile must be in SBUF.")

// -----

// Tensor indirection (.indirect() views) in IR text: the documented rules hold. tensor_copy with an indirect src
// runs on the Vector or Scalar engine, not GpSimd.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x2xi32>
    penguin.tensor_copy dst %x[0 : [128, 128], [1, 64]], src %x[0 : [128, 128], [1, 64] + 1*indirect src_offset], src_offset %i[0 : [2, 128], [1, 2]] {engine = "gpsimd"}
    penguin.return
  }
}
// CHECK: tensor_copy: with tensor indirection it runs on vector or scalar, not gpsimd (the NKI reference: "When tensor indirection is used, the operation must run on the Vector or Scalar engine.")

// -----

// nc_matmul: an indirect moving operand cannot be transposed.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %s = penguin.alloc "s" : !penguin.tensor<sbuf, 128x128xbf16>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x128xbf16>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x1xi32>
    penguin.matmul dst %p[0 : [128, 128], [1, 128]], stationary %s[0 : [128, 128], [1, 128]], moving %s[0 : [128, 128], [1, 128] + 1*indirect moving_offset], moving_offset %i[0 : [1, 128], [1, 1]] {is_transpose = true}
    penguin.return
  }
}
// CHECK: nc_matmul: with is_transpose=True, moving cannot be a tensor indirection view (the NKI reference: "When is_transpose=True, moving cannot use tensor indirection.")

// -----

// nc_matmul: indirect operands are TensorE float dtypes (float32 is not one).
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %s = penguin.alloc "s" : !penguin.tensor<sbuf, 128x128xf32>
    %p = penguin.alloc "p" : !penguin.tensor<psum, 128x128xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x1xi32>
    penguin.matmul dst %p[0 : [128, 128], [1, 128]], stationary %s[0 : [128, 128], [1, 128] + 1*indirect stationary_offset], moving %s[0 : [128, 128], [1, 128]], stationary_offset %i[0 : [1, 128], [1, 1]]
    penguin.return
  }
}
// CHECK: nc_matmul: indirect 'stationary' must be one of float16, bfloat16, float8_e4m3, float8_e5m2, float8_e4m3fn, got float32

// -----

// A module for trn2 (NeuronCore-v3) has no tensor indirection.
builtin.module attributes {nkic.target = "gen3"} {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x2xi32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 64] + 1*indirect dst_offset], data1 %x[0 : [128, 128], [1, 64]], data2 %x[0 : [128, 128], [1, 64]], dst_offset %i[0 : [2, 128], [1, 2]] {op = "add"}
    penguin.return
  }
}
// CHECK: tensor_tensor: 'dst' is a tensor indirection view (.indirect), which needs NeuronCore-v4 or newer on NeuronCore-v3

// -----

// An operand the instruction does not declare for tensor indirection cannot be a view.
builtin.module {
  penguin.kernel @k : () -> () program {
  ^bb0():
    %x = penguin.alloc "x" : !penguin.tensor<sbuf, 128x128xf32>
    %i = penguin.alloc "i" : !penguin.tensor<sbuf, 128x2xi32>
    penguin.tensor_tensor dst %x[0 : [128, 128], [1, 64]], data1 %x[0 : [128, 128], [1, 64]], data2 %x[0 : [128, 128], [1, 64] + 1*indirect data2_offset], data2_offset %i[0 : [2, 128], [1, 2]] {op = "add"}
    penguin.return
  }
}
// CHECK: 'penguin.tensor_tensor' has no operand role 'data2_offset' (roles: dst, data1, data2, dst_offset, data1_offset)
