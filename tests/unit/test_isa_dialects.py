"""The per-engine ISA dialects: text round trips, Instr round trips, encodings and verifier rejections."""

from __future__ import annotations

import io
import re

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import NkicAttrs
from nkic.dialects.isa import (
    DIALECTS,
    ENGINE_DIALECTS,
    ISA_OPS,
    CoreOp,
    IsaInst,
    IsaLocAttr,
    StreamOp,
    VarOp,
    core_streams,
    from_instr,
)

ActActivateOp = ISA_OPS[("act", "activate")]
SpDmaCopyOp = ISA_OPS[("sp", "dma_copy")]
from nkic.runtime.encoding import Instr, Operand, decode_stream, encode_stream, f32_bits, i32_bits
from nkic.target.isa import OPCODES, StringTable

ROW = "[0 : [1, 128], [1, 512]]"
COL = "[0 : [1, 128], [1, 1]]"


def _sb(addr: int, dtype: str = "float32", ap: str = ROW, part: int = 0) -> str:
    return f"sbuf(p{part}, {addr:#x}, {dtype}){ap}"


def _ps(addr: int, dtype: str = "float32", ap: str = ROW) -> str:
    return f"psum(p0, {addr:#x}, {dtype}){ap}"


# One canonical line per (engine, op); several formats appear twice to cover their optional slots and flags.
PROGRAM: dict[str, list[str]] = {
    "sp": [
        f"isa_sp.dma_copy dst {_sb(0)}, src hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] "
        "{id = 0 : i64, queue = 0 : i64, signal_sem = 8 : i64}",
        f"isa_sp.dma_copy dst {_sb(0x4000, ap='[0 : [1, 64], [1, 32]]')}, "
        "src hbm(var 0, 0x80, float32)[0 : [512, 32], [1, 64]] "
        "{id = 1 : i64, queue = 1 : i64, transpose = true, signal_sem = 9 : i64}",
        "isa_sp.sem_wait {id = 2 : i64, wait_sem = 2 : i64, wait_value = 3 : i64}",
        f"isa_sp.dma_copy dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], src {_sb(0x2000)} "
        "{id = 3 : i64, queue = 2 : i64, signal_sem = 10 : i64}",
        f"isa_sp.dma_compute dst hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]], "
        f"src0 hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]], src1 {_sb(0x2000)} "
        "{id = 42 : i64, queue = 3 : i64, reduce_op = \"add\", signal_sem = 11 : i64}",
        f"isa_sp.debug_print src {_sb(0x2000, 'bfloat16', '[0 : [1, 3], [1, 4]]')} "
        "{id = 62 : i64, queue = 1 : i64, prefix = \"value of a:\", signal_sem = 9 : i64}",
    ],
    "pe": [
        "isa_pe.sem_wait {id = 4 : i64, wait_sem = 8 : i64, wait_value = 1 : i64}",
        f"isa_pe.matmul dst {_ps(0)}, stationary {_sb(0, 'bfloat16', '[0 : [1, 128], [1, 128]]')}, "
        f"moving {_sb(0x100, 'bfloat16')} {{id = 5 : i64, accumulate = true, signal_sem = 0 : i64}}",
        f"isa_pe.transpose dst {_ps(0x800, ap='[0 : [1, 64], [1, 128]]')}, src {_sb(0, ap='[0 : [1, 128], [1, 64]]')} "
        "{id = 6 : i64, wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 0 : i64}",
        f"isa_pe.matmul_mx dst {_ps(0)}, stationary {_sb(0, 'float8_e4m3fn_x4', '[0 : [1, 128], [1, 128]]')}, "
        f"moving {_sb(0x200, 'float4_e2m1fn_x4')}, "
        f"stationary_scale {_sb(0x1000, 'float8_e8m0fnu', '[0 : [1, 128], [1, 128]]')}, "
        f"moving_scale {_sb(0x1100, 'uint8')} {{id = 42 : i64, accumulate = true}}",
    ],
    "act": [
        f"isa_act.activate dst {_sb(0x800)}, src {_sb(0)} {{id = 7 : i64, func = \"exp\", "
        "scale = 5.000000e-01 : f32, bias = -1.000000e+00 : f32, wait_sem = 8 : i64, wait_value = 1 : i64, "
        "signal_sem = 1 : i64}",
        f"isa_act.activate dst {_sb(0x800, 'bfloat16', '[0 : [1, 128], [2, 256]]')}, "
        f"src {_ps(0, ap='[0 : [1, 128], [1, 256]]')}, bias {_sb(0x3000, ap=COL)}, scale {_sb(0x3004, ap=COL)}, "
        f"reduce_res {_sb(0x3008, ap=COL)} {{id = 8 : i64, func = \"gelu_apprx_tanh\", "
        "reduce_cmd = \"reset_reduce\", reduce_op = \"add\", signal_sem = 1 : i64}",
        f"isa_act.tensor_scalar dst {_sb(0x800)}, src {_sb(0)} {{id = 10 : i64, op0 = \"multiply\", "
        "operand0 = 2.000000e+00 : f32, op1 = \"add\", operand1 = 0.000000e+00 : f32, reverse1 = true}",
        f"isa_act.tensor_copy dst {_sb(0x800, 'bfloat16', '[0 : [1, 64], [1, 16], [1, 32]]', part=64)}, "
        f"src {_sb(0, ap='[0 : [1, 64], [32, 16], [1, 32]]')} {{id = 11 : i64}}",
        f"isa_act.activate2 dst {_sb(0x800)}, src {_ps(0)}, imm0 {_sb(0x3000, ap=COL)}, relu_param {_sb(0x3004, ap=COL)}, "
        f"reduce_res {_sb(0x3008, ap=COL)} {{id = 72 : i64, func = \"prelu\", op0 = \"multiply\", op1 = \"subtract\", "
        "imm1 = 5.000000e-01 : f32, reduce_cmd = \"reset_reduce\", reduce_op = \"abs_max\", reverse1 = true}",
        "isa_act.sem_wait {id = 13 : i64, wait_sem = 0 : i64, wait_value = 2 : i64, signal_sem = 1 : i64}",
    ],
    "dve": [
        f"isa_dve.tensor_tensor dst {_sb(0x800)}, in0 {_sb(0)}, in1 {_ps(0)} "
        "{id = 14 : i64, op = \"maximum\", signal_sem = 2 : i64}",
        f"isa_dve.tensor_scalar dst {_sb(0x800)}, src {_sb(0)}, operand0 {_sb(0x3000, ap=COL)} "
        "{id = 15 : i64, op0 = \"subtract\", reverse0 = true}",
        f"isa_dve.tensor_reduce dst {_sb(0x3000, ap='[0 : [1, 128], [1, 4]]')}, "
        f"src {_sb(0, ap='[0 : [1, 128], [128, 4], [1, 128]]')} "
        "{id = 16 : i64, op = \"maximum\", num_reduced_dims = 1 : i64, negate = true}",
        f"isa_dve.tensor_copy dst {_sb(0x800)}, src {_ps(0)} {{id = 17 : i64}}",
        f"isa_dve.memset dst {_sb(0x3000, 'int32', '[0 : [1, 128], [1, 4]]')} {{id = 18 : i64, value = -7 : i64}}",
        f"isa_dve.reciprocal dst {_sb(0x800)}, src {_sb(0)} {{id = 19 : i64}}",
        f"isa_dve.tensor_scalar_reduce dst {_sb(0x800)}, src {_sb(0)}, reduce_res {_sb(0x3000, ap=COL)} "
        "{id = 20 : i64, op0 = \"multiply\", operand0 = 2.500000e-01 : f32, reduce_op = \"add\", negate = true}",
        f"isa_dve.scalar_tensor_tensor dst {_sb(0x800)}, data {_sb(0)}, operand0 {_sb(0x3000, ap=COL)}, "
        f"operand1 {_ps(0)} {{id = 21 : i64, op0 = \"subtract\", op1 = \"multiply\", reverse0 = true, "
        "reverse1 = true}",
        f"isa_dve.transpose dst {_sb(0x800, ap='[0 : [1, 32], [1, 32]]')}, "
        f"src {_sb(0, ap='[0 : [1, 32], [1, 32]]', part=32)} {{id = 22 : i64}}",
        f"isa_dve.range_select dst {_sb(0x800)}, on_true {_ps(0)}, bound0 {_sb(0x3000, ap=COL)}, "
        f"bound1 {_sb(0x3004, ap=COL)}, reduce_res {_sb(0x3008, ap=COL)} {{id = 33 : i64, comp_op0 = \"greater\", "
        f"comp_op1 = \"less_equal\", on_false_value = -3.000000e+04 : f32, range_start = -2 : i64, "
        f"reduce_cmd = \"reset_reduce\", reduce_op = \"maximum\"}}",
        f"isa_dve.tensor_tensor_scan dst {_sb(0x800)}, in0 {_sb(0)}, in1 {_ps(0)}, initial {_sb(0x3000, ap=COL)} "
        f"{{id = 34 : i64, op0 = \"multiply\", op1 = \"add\", reverse1 = true}}",
        f"isa_dve.tensor_copy_predicated dst {_sb(0x800)}, predicate {_sb(0x2000, 'uint8')} "
        f"{{id = 35 : i64, src = 1.500000e+00 : f32}}",
        f"isa_dve.bn_stats dst {_sb(0x3000, ap='[0 : [1, 128], [1, 6]]')}, src {_sb(0)} {{id = 36 : i64}}",
        f"isa_dve.bn_aggr dst {_sb(0x3100, ap='[0 : [1, 128], [1, 2]]')}, "
        f"src {_sb(0x3000, ap='[0 : [1, 128], [1, 6]]')} {{id = 37 : i64}}",
        f"isa_dve.exponential dst {_sb(0x800)}, src {_ps(0)}, max_value {_sb(0x3000, ap=COL)} "
        f"{{id = 38 : i64, reduce_cmd = \"reduce\", reduce_init = 1.000000e+00 : f32}}",
        f"isa_dve.select_reduce dst {_sb(0x800)}, predicate {_sb(0x2000, 'uint8')}, on_true {_ps(0)} "
        f"{{id = 39 : i64, on_false = -1.000000e+00 : f32, reduce_cmd = \"reduce\", reduce_op = \"maximum\"}}",
        f"isa_dve.tensor_scalar_cumulative dst {_sb(0x800)}, src {_sb(0)}, imm0 {_sb(0x3000, ap=COL)}, "
        f"imm1 {_sb(0x3004, ap=COL)} {{id = 40 : i64, op0 = \"multiply\", op1 = \"add\", reduce_cmd = \"load_reduce\"}}",
        f"isa_dve.set_rng_seed src {_sb(0x3200, 'int32', '[0 : [1, 1], [1, 1]]')} {{id = 42 : i64}}",
        f"isa_dve.rng dst {_sb(0x3300, 'uint16', '[0 : [1, 128], [1, 64]]')} {{id = 43 : i64}}",
        f"isa_dve.rand2 dst {_ps(0, 'bfloat16')}, max {_sb(0x3000, ap=COL)} {{id = 44 : i64, min = -1.000000e+00 : f32}}",
        f"isa_dve.dropout dst {_sb(0x800)}, src {_sb(0)}, prob {_sb(0x3000, ap=COL)} {{id = 45 : i64}}",
        f"isa_dve.rand_set_state src {_sb(0x3400, 'uint32', '[0 : [1, 128], [1, 24]]')} {{id = 46 : i64}}",
        f"isa_dve.rand_get_state dst {_ps(0, 'uint32', '[0 : [1, 128], [1, 24]]')} {{id = 47 : i64}}",
        f"isa_dve.max8 dst {_sb(0x3000, ap='[0 : [1, 128], [1, 8]]')}, src {_sb(0)} {{id = 51 : i64}}",
        f"isa_dve.find_index8 dst {_sb(0x3100, 'uint16', '[0 : [1, 128], [1, 8]]')}, "
        f"src {_sb(0, ap='[0 : [1, 128], [4, 128], [1, 4]]')}, vals {_sb(0x3000, ap='[0 : [1, 128], [1, 8]]')} "
        "{id = 52 : i64}",
        f"isa_dve.match_replace8 dst {_sb(0)}, src {_sb(0)}, vals {_sb(0x3000, ap='[0 : [1, 128], [1, 8]]')}, "
        f"dst_idx {_sb(0x3200, 'uint32', '[0 : [1, 128], [1, 8]]')} {{id = 53 : i64, imm = -1.000000e+00 : f32}}",
        f"isa_dve.nc_stream_shuffle dst {_sb(0x800, ap='[0 : [1, 32], [1, 512]]')}, "
        f"src {_sb(0, ap='[0 : [1, 32], [1, 512]]')} {{id = 46 : i64, mask0 = 33619999 : i64, mask7 = 4280097819 : i64}}",
        f"isa_dve.quantize_mx dst {_sb(0x4000, 'float8_e5m2_x4', '[0 : [1, 128], [1, 128]]')}, "
        f"src {_sb(0, 'bfloat16')}, dst_scale {_sb(0x4200, 'float8_e8m0fnu', '[0 : [1, 128], [1, 128]]')} "
        "{id = 43 : i64}",
        "isa_dve.sem_wait {id = 23 : i64, wait_sem = 3 : i64, wait_value = 1 : i64}",
    ],
    "pool": [
        f"isa_pool.tensor_tensor dst {_sb(0x800, 'int32')}, in0 {_sb(0, 'int32')}, in1 {_sb(0, 'int32')} "
        "{id = 24 : i64, op = \"bitwise_xor\", signal_sem = 3 : i64}",
        f"isa_pool.tensor_scalar dst {_sb(0x800)}, src {_sb(0)}, operand0 {_sb(0x3000, ap=COL)}, "
        f"operand1 {_sb(0x3004, ap=COL)} {{id = 25 : i64, op0 = \"rsqrt\", op1 = \"bypass\"}}",
        f"isa_pool.tensor_copy dst {_sb(0x800, 'float16')}, src {_sb(0)} {{id = 27 : i64}}",
        f"isa_pool.memset dst {_sb(0, 'bfloat16')} {{id = 28 : i64, value = 1.000000e+00 : f32}}",
        f"isa_pool.iota dst {_sb(0, 'int32', '[0 : [1, 128], [1, 64]]')}, "
        "pattern none(int32)[0 : [64, 128], [1, 64]] {id = 29 : i64, offset = -3 : i64}",
        f"isa_pool.affine_select dst {_sb(0x800, ap='[0 : [1, 128], [1, 128]]')}, "
        f"on_true {_sb(0, ap='[0 : [1, 128], [1, 128]]')}, pattern none(int32)[0 : [1, 128], [-1, 128]] "
        "{id = 30 : i64, cmp_op = \"greater_equal\", on_false_value = -3.000000e+04 : f32}",
        f"isa_pool.tensor_partition_reduce dst {_sb(0x800, ap='[0 : [1, 1], [1, 512]]')}, src {_sb(0)} "
        f"{{id = 41 : i64, op = \"add\"}}",
        f"isa_pool.rng dst {_sb(0x3300, 'int8', '[0 : [1, 128], [1, 64]]')} {{id = 48 : i64}}",
        f"isa_pool.rand_set_state src {_sb(0x3400, 'uint32', '[0 : [1, 128], [1, 6]]')} {{id = 49 : i64}}",
        f"isa_pool.rand_get_state dst {_sb(0x3400, 'uint32', '[0 : [1, 128], [1, 6]]')} {{id = 50 : i64}}",
        f"isa_pool.nonzero_with_count dst {_sb(0x4000, 'int32', '[0 : [1, 128], [1, 513]]')}, src {_sb(0)} "
        "{id = 54 : i64, index_offset = 512 : i64, padding_val = 0 : i64}",
        f"isa_pool.topk dst {_sb(0x5000, 'bfloat16', '[0 : [1, 128], [1, 64]]')}, "
        f"idx_dst {_sb(0x5100, 'uint32', '[0 : [1, 128], [1, 64]]')}, "
        f"src {_sb(0x6000, 'bfloat16', '[0 : [1, 128], [1, 256]]')} "
        "{id = 55 : i64, n = 4000 : i64}",
        f"isa_pool.local_gather dst {_sb(0x800, ap='[0 : [1, 128], [1, 128]]')}, src {_sb(0)}, "
        f"index {_sb(0x3000, 'uint16', '[0 : [1, 128], [1, 4]]')} "
        "{id = 43 : i64, num_elem_per_idx = 2 : i64, num_valid_indices = 64 : i64}",
        f"isa_pool.nc_n_gather dst {_sb(0x800, ap='[0 : [1, 128], [1, 16]]')}, src {_sb(0)}, "
        f"indices {_sb(0x3000, 'uint32', '[0 : [1, 128], [1, 16]]')} {{id = 44 : i64}}",
        f"isa_pool.sequence_bounds dst {_sb(0x800, 'int32', '[0 : [1, 1], [64, 2], [1, 64]]')}, "
        f"src {_sb(0, 'int32', '[0 : [1, 1], [1, 64]]')} {{id = 45 : i64}}",
        "isa_pool.sem_wait {id = 32 : i64, wait_sem = 9 : i64, wait_value = 1 : i64}",
    ],
}
# Registers, a runtime loop and a counted loop, in every stream (control instructions run on all engines at a barrier).
CONTROL = [
    f"reg_load src {_sb(0x3000, 'int32', '[0 : [1, 1], [1, 1]]')} {{id = 50 : i64, dst_reg = 1 : i64}}",
    "reg_alu {id = 51 : i64, dst_reg = 2 : i64, op = \"less\", imm0 = -1 : i64, src1_reg = 1 : i64}",
    "loop_begin {id = 52 : i64, cond_reg = 2 : i64}",
    "reg_store dst hbm(var 2, 0x0, int32)[0 : [1, 1], [1, 1]] {id = 53 : i64, src_reg = 1 : i64}",
    "loop_end {id = 54 : i64, cond_reg = 2 : i64}",
    "counted_loop_begin {id = 56 : i64, iv_reg = 3 : i64, bound = 2 : i64}",
    "counted_loop_end {id = 57 : i64, iv_reg = 3 : i64, step = 1 : i64, bound = 2 : i64}",
]
# The LNC=2 pair: SENDRECV on each trigger engine (gpsimd_dma on pool), CORE_BARRIER (control) in every stream.
_SENDRECV = (f"sendrecv dst {_sb(0x7000, ap='[0 : [1, 128], [1, 64]]')}, src {_sb(0x7100, ap='[0 : [1, 128], [1, 64]]')} "
             "{{id = 60 : i64, send_to_rank = 1 : i64, recv_from_rank = 1 : i64{extra}}}")
for _engine in ("sp", "act", "dve", "pool"):
    _extra = ", gpsimd_dma = true" if _engine == "pool" else ", pipe_id = 3 : i64"
    PROGRAM[_engine].append(f"isa_{_engine}." + _SENDRECV.format(extra=_extra))
CONTROL.append("core_barrier data hbm(var 1, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 61 : i64, core_mask = 3 : i64}")
# Collectives: the rank ids on every engine, the collective DMAs on the engine that triggers them (SP).
CONTROL += ['rank_id {id = 62 : i64, dst_reg = 1 : i64}',
            'ring_rank_id {id = 63 : i64, dst_reg = 2 : i64, iteration = 1 : i64, replica_groups = "0,1,2,3"}']
PROGRAM["sp"] += [
    'isa_sp.all_reduce dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 2 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, op = "add", signal_sem = 9 : i64}',
    'isa_sp.all_gather dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]] {id = 3 : i64, queue = 2 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}',
    'isa_sp.reduce_scatter dst hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]] {id = 4 : i64, queue = 3 : i64, replica_groups = "0,1;2,3", group_size = 2 : i64, op = "maximum"}',
    'isa_sp.all_to_all dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]] {id = 5 : i64, queue = 0 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}',
    'isa_sp.all_gather_v dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]], metadata hbm(var 2, 0x0, uint32)[0 : [4, 3], [1, 4]] {id = 6 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, recv_counts_known = true}',
    'isa_sp.all_to_all_v dst hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], src hbm(var 1, 0x0, float32)[0 : [64, 16], [1, 64]], metadata hbm(var 2, 0x0, uint32)[0 : [4, 3], [1, 4]] {id = 7 : i64, queue = 2 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64}',
    'isa_sp.collective_permute dst hbm(var 1, 0x0, float32)[0 : [64, 4], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 4], [1, 64]] {id = 8 : i64, queue = 3 : i64, source_target_pairs = "0>1;1>0", group_size = 2 : i64}',
    'isa_sp.collective_permute_implicit dst sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 9 : i64, queue = 0 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, channel = 1 : i64}',
    'isa_sp.collective_permute_implicit_reduce dst sbuf(p0, 0x200, float32)[0 : [1, 128], [1, 64]], src0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]], src1 sbuf(p0, 0x100, float32)[0 : [1, 128], [1, 64]] {id = 10 : i64, queue = 1 : i64, replica_groups = "0,1,2,3", group_size = 4 : i64, op = "add"}',
]
for _engine, _lines in PROGRAM.items():
    _lines += [f"isa_{_engine}.{line}" for line in CONTROL]
VARS = [
    "isa.var @a : input [128, 512] float32 {var_id = 0 : i64}",
    "isa.var @out : output [128, 512] float32 {var_id = 1 : i64}",
    "isa.var @scratch : tmp-buf [64] int32 {var_id = 2 : i64}",
]


def module_text(streams: dict[str, list[str]], variables: list[str] = VARS) -> str:
    lines = ["builtin.module {", "  isa.core @sg00 {", *(f"    {v}" for v in variables)]
    for engine, insts in streams.items():
        lines += [f'    isa.stream "{engine}" {{', *(f"      {i}" for i in insts), "    }"]
    return "\n".join([*lines, "  }", "}"])


@pytest.fixture(scope="module")
def ctx() -> Context:
    c = Context()
    for dialect in (Builtin, NkicAttrs, *DIALECTS.values()):
        c.load_dialect(dialect)
    return c


def parse(ctx: Context, text: str) -> ModuleOp:
    return Parser(ctx, text).parse_module()


def generic(op: ModuleOp) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(op)
    return out.getvalue()


def all_insts(module: ModuleOp) -> list[IsaInst]:
    return [op for op in module.walk() if isinstance(op, IsaInst)]


# -- text ----------------------------------------------------------------------------------------------------------


def test_program_uses_every_op_of_every_engine(ctx: Context) -> None:
    used = {op.name for op in all_insts(parse(ctx, module_text(PROGRAM)))}
    declared = {op.name for d in ENGINE_DIALECTS.values() for op in d.operations}
    assert used == declared
    # the (engine, opcode) pairs the declarations allow: one op each
    assert len(ISA_OPS) == len(declared) == sum(len(spec.engines) for spec in OPCODES.values())


def test_custom_syntax_round_trip(ctx: Context) -> None:
    text = module_text(PROGRAM)
    module = parse(ctx, text)
    module.verify()
    assert str(module) == text  # the program is written in canonical printed form
    again = parse(ctx, str(module))
    again.verify()
    assert str(again) == text


def test_generic_round_trip(ctx: Context) -> None:
    module = parse(ctx, module_text(PROGRAM))
    back = parse(ctx, generic(module))
    back.verify()
    assert str(back) == str(module)
    assert generic(back) == generic(module)


def test_core_streams(ctx: Context) -> None:
    core = parse(ctx, module_text(PROGRAM)).body.block.first_op
    assert isinstance(core, CoreOp)
    streams = core_streams(core)
    assert list(streams) == list(PROGRAM)
    assert {e: [op.name for op in ops] for e, ops in streams.items()} == {
        e: [line.split()[0] for line in lines] for e, lines in PROGRAM.items()
    }


def test_empty_stream_is_legal(ctx: Context) -> None:
    module = parse(ctx, module_text({"pe": [], "sp": []}, []))
    module.verify()
    assert core_streams(module.body.block.first_op) == {"pe": [], "sp": []}


# -- Instr round trips -----------------------------------------------------------------------------------------------


ALL_LINES = [line for lines in PROGRAM.values() for line in lines]


@pytest.mark.parametrize("index", range(len(ALL_LINES)), ids=[line.split()[0] for line in ALL_LINES])
def test_instr_round_trip(ctx: Context, index: int) -> None:
    op = all_insts(parse(ctx, module_text(PROGRAM)))[index]
    strings = StringTable()  # the NEFF's string table: str immediates (debug_print's prefix) are indices into it
    instr = op.to_instr(strings)
    back = from_instr(instr, strings.strings)
    back.verify()
    assert str(back) == str(op)
    assert back.to_instr(strings) == instr


def test_binary_stream_round_trip(ctx: Context) -> None:
    core = parse(ctx, module_text(PROGRAM)).body.block.first_op
    strings = StringTable()
    for engine, ops in core_streams(core).items():
        instrs = [op.to_instr(strings) for op in ops]
        decoded_engine, decoded = decode_stream(encode_stream(engine, instrs))
        assert decoded_engine == engine and decoded == instrs
        assert [str(from_instr(i, strings.strings)) for i in decoded] == [str(op) for op in ops]


def test_build_the_documented_example(ctx: Context) -> None:
    tile = Operand("sbuf", "float32", ((1, 128), (1, 512)))
    dma = SpDmaCopyOp.make(
        0, {"dst": tile, "src": Operand("hbm", "float32", ((512, 128), (1, 512)))}, queue=0, signal_sem=8
    )
    act = ActActivateOp.make(
        1, {"dst": Operand("sbuf", "float32", ((1, 128), (1, 512)), address=0x800), "src": tile},
        func="exp", wait_sem=8, wait_value=1, signal_sem=1,
    )  # fmt: skip
    core = CoreOp("sg00")
    core.body.block.add_ops([VarOp("a", "input", [256, 512], "float32", 0), StreamOp("sp"), StreamOp("act")])
    streams = [op for op in core.body.block.ops if isinstance(op, StreamOp)]
    streams[0].body.block.add_op(dma)
    streams[1].body.block.add_op(act)
    module = ModuleOp([core])
    module.verify()
    assert str(module) == EXAMPLE


EXAMPLE = """builtin.module {
  isa.core @sg00 {
    isa.var @a : input [256, 512] float32 {var_id = 0 : i64}
    isa.stream "sp" {
      isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]], src hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] {id = 0 : i64, queue = 0 : i64, signal_sem = 8 : i64}
    }
    isa.stream "act" {
      isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]], src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 1 : i64, func = "exp", wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}
    }
  }
}"""  # noqa: E501


# -- encodings follow ISA_FORMAT.md --------------------------------------------------------------------------------


def _inst(ctx: Context, name: str) -> IsaInst:
    return next(op for op in all_insts(parse(ctx, module_text(PROGRAM))) if op.name == name)


def test_activate_immediates(ctx: Context) -> None:
    ins = _inst(ctx, "isa_act.activate").to_instr()
    assert ins.opcode == "ACTIVATE" and ins.engine == "act" and ins.inst_id == 7
    assert ins.imms == (1, f32_bits(0.5), f32_bits(-1.0))  # func exp; reduce_cmd idle / op bypass are zero
    assert (ins.wait_sem, ins.wait_value, ins.signal_sem) == (8, 1, 1)
    relu = ActActivateOp.make(0, dict(zip(("dst", "src"), ins.operands)), func="relu")
    assert relu.to_instr().imms == (5, f32_bits(1.0))  # absent scale encodes 1.0, absent bias 0.0
    zero_scale = ActActivateOp.from_instr(Instr("ACTIVATE", "act", ins.operands, (5,)))
    assert zero_scale.field("scale") == 0.0 and zero_scale.field("bias") is None  # only defaults are dropped


def test_tensor_scalar_flags(ctx: Context) -> None:
    act = _inst(ctx, "isa_act.tensor_scalar").to_instr()
    assert act.flags == 0b110  # reverse1 | has_op1
    assert act.imms == (3, f32_bits(2.0), 1)  # multiply, 2.0, add, operand1 0.0 dropped as trailing zero
    dve = _inst(ctx, "isa_dve.tensor_scalar").to_instr()
    assert dve.flags == 0b001 and dve.imms == (2,)  # operand0 is a tensor: its word is unused


def test_memset_and_iota_words(ctx: Context) -> None:
    memset = _inst(ctx, "isa_dve.memset").to_instr()
    assert (memset.imms, memset.flags) == ((i32_bits(-7),), 1)
    assert _inst(ctx, "isa_pool.memset").to_instr().imms == (f32_bits(1.0),)
    iota = _inst(ctx, "isa_pool.iota").to_instr()
    assert iota.imms == (i32_bits(-3),) and iota.operands[1].memory == "none"


def test_dma_and_matmul_words(ctx: Context) -> None:
    dma = [op for op in all_insts(parse(ctx, module_text(PROGRAM))) if op.name == "isa_sp.dma_copy"][1].to_instr()
    assert (dma.imms, dma.flags) == ((1,), 1)
    matmul = _inst(ctx, "isa_pe.matmul").to_instr()
    assert matmul.flags == 1 and [o.memory for o in matmul.operands] == ["psum", "sbuf", "sbuf"]


def test_from_instr_rejects_what_it_cannot_hold() -> None:
    tile = Operand("sbuf", "float32", ((1, 128), (1, 4)))
    with pytest.raises(ValueError, match="no ISA op for ACTIVATE on engine 'dve'"):
        from_instr(Instr("ACTIVATE", "dve", (tile, tile)))
    with pytest.raises(ValueError, match="beyond"):
        from_instr(Instr("TENSOR_COPY", "dve", (tile, tile), (1,)))
    with pytest.raises(ValueError, match="flag"):
        from_instr(Instr("TENSOR_COPY", "dve", (tile, tile), (), 1))


# -- verification --------------------------------------------------------------------------------------------------

MM_ST = _sb(0, "bfloat16", "[0 : [1, 128], [1, 128]]")
MM_MV = _sb(0x100, "bfloat16")

INVALID: list[tuple[str, str, str]] = [
    ("pool", f"isa_pool.tensor_copy dst {_sb(0)}, src {_ps(0)} {{id = 0 : i64}}", "engine pool cannot access PSUM"),
    ("pool", f"isa_pool.tensor_tensor dst {_ps(0)}, in0 {_sb(0)}, in1 {_sb(0)} {{id = 0 : i64, op = \"add\"}}",
     "engine pool cannot access PSUM"),
    ("pe", f"isa_pe.matmul dst {_sb(0)}, stationary {MM_ST}, moving {MM_MV} {{id = 0 : i64}}",
     "PE MATMUL dst must be in psum"),
    ("pe", f"isa_pe.matmul dst {_ps(0)}, stationary {MM_ST}, moving {_ps(0x100, 'bfloat16')} {{id = 0 : i64}}",
     "PE MATMUL moving must be in sbuf"),
    ("pe", f"isa_pe.matmul dst {_ps(0x400)}, stationary {MM_ST}, moving {MM_MV} {{id = 0 : i64}}",
     "cross a 2048-byte PSUM bank"),
    ("sp", f"isa_sp.dma_copy dst {_ps(0)}, src {_sb(0)} {{id = 0 : i64, queue = 0 : i64}}",
     "engine sp cannot access PSUM"),
    ("dve", f"isa_dve.tensor_copy dst {_sb(0, ap='[0 : [1, 64], [1, 512]]', part=100)}, "
     f"src {_sb(0, ap='[0 : [1, 64], [1, 512]]')} {{id = 0 : i64}}", "exceed the 128 partitions"),
    ("dve", f"isa_dve.tensor_copy dst {_sb(0x3bffc)}, src {_sb(0)} {{id = 0 : i64}}", "245752-byte sbuf partition"),
    ("act", f"isa_act.activate dst {_sb(0)} {{id = 0 : i64, func = \"exp\"}}", "requires a 'src' operand"),
    ("pe", f"isa_pe.matmul dst {_ps(0)}, moving {MM_MV} {{id = 0 : i64}}", "requires a 'stationary' operand"),
    ("pe", f"isa_pe.matmul_mx dst {_ps(0, ap='[0 : [1, 128], [1, 512]]')}, "
     f"stationary {_sb(0, 'float8_e4m3fn_x4', '[0 : [1, 64], [1, 128]]')}, "
     f"moving {_sb(0x200, 'float8_e4m3fn_x4', '[0 : [1, 64], [1, 512]]')}, "
     f"stationary_scale {_sb(0x1000, 'uint8', '[0 : [1, 8], [1, 128]]')}, "
     f"moving_scale {_sb(0x1100, 'uint8', '[0 : [1, 64], [1, 512]]')} {{id = 0 : i64}}",
     "span at least 36 partitions for 64 data partitions"),
    ("dve", f"isa_dve.quantize_mx dst {_sb(0x4000, 'float8_e5m2_x4', '[0 : [1, 128], [1, 100]]')}, "
     f"src {_sb(0, 'bfloat16')}, dst_scale {_sb(0x4200, 'uint8', '[0 : [1, 128], [1, 128]]')} {{id = 0 : i64}}",
     "writes (128, 128) packed elements, not (128, 100)"),
    ("act", f"isa_act.activate dst {_sb(0)}, src {_sb(0)} {{id = 0 : i64, func = \"expo\"}}",
     "unknown activation function 'expo'"),
    ("act", f"isa_act.activate dst {_sb(0)}, src {_sb(0)} {{id = 0 : i64, func = \"exp\", reduce_cmd = \"sum\"}}",
     "unknown reduce command 'sum'"),
    ("dve", f"isa_dve.tensor_reduce dst {_sb(0, ap=COL)}, src {_sb(0)} {{id = 0 : i64, op = \"plus\"}}",
     "unknown ALU opcode 'plus'"),
    ("dve", f"isa_dve.tensor_scalar dst {_sb(0)}, src {_sb(0)} {{id = 0 : i64, op0 = \"add\"}}",
     "requires 'operand0' (a tensor or an immediate)"),
    ("dve", f"isa_dve.tensor_scalar dst {_sb(0)}, src {_sb(0)} {{id = 0 : i64, op0 = \"add\", "
     "operand0 = 1.0 : f32, operand1 = 1.0 : f32}", "operand1/reverse1 given without op1"),
    ("act", f"isa_act.activate dst {_sb(0)}, src {_sb(0)}, scale {_sb(0x3000, ap=COL)} {{id = 0 : i64, "
     "func = \"exp\", scale = 2.0 : f32}", "'scale' is given both as a tensor and as an immediate"),
    ("act", f"isa_act.activate dst {_sb(0)}, src {_sb(0)}, bias {_sb(0x3000)} {{id = 0 : i64, func = \"exp\"}}",
     "'bias' must be a (128, 1) tile"),
    ("dve", f"isa_dve.tensor_copy dst {_sb(0)}, src {_sb(0, ap='[0 : [1, 128], [1, 256]]')} {{id = 0 : i64}}",
     "'src' is (128, 256)"),
    ("pe", "isa_pe.sem_wait {id = 0 : i64}", "requires wait_sem"),
    ("pe", "isa_pe.sem_wait {id = 0 : i64, wait_sem = 1 : i64}", "wait_sem and wait_value must be given together"),
    ("dve", "isa_dve.sem_wait {id = 0 : i64, wait_sem = 30 : i64, wait_value = 1 : i64}", "wait_sem 30 is not"),
    ("dve", "isa_dve.sem_wait {id = 0 : i64, wait_sem = 0 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}",
     "may only signal semaphore 2, not 1"),
    ("sp", f"isa_sp.dma_copy dst {_sb(0)}, src {_sb(0x800)} {{id = 0 : i64, queue = 16 : i64}}",
     "DMA queue 16 outside 0..15"),
    ("sp", f"isa_sp.dma_copy dst {_sb(0)}, src hbm(var 5, 0x0, float32)[0 : [512, 128], [1, 512]] "
     "{id = 0 : i64, queue = 0 : i64}", "uses undeclared var 5"),
    ("dve", f"isa_dve.tensor_copy dst {_sb(0)}, src hbm(var 0, 0x0, float32)[0 : [512, 128], [1, 512]] "
     "{id = 0 : i64}", "engine dve cannot access HBM"),
    ("pool", f"isa_pool.iota dst {_sb(0, 'int32')}, pattern {_sb(0, 'int32')} {{id = 0 : i64}}",
     "only the 'pattern' slot is pattern-only"),
    ("act", f"isa_act.tensor_copy dst {_sb(0)}, src sbuf(p0, 0x0, float32)[4 : [1, 128], [1, 512]] {{id = 0 : i64}}",
     "ISA patterns have offset 0"),
    ("act", f"isa_dve.tensor_copy dst {_sb(0)}, src {_sb(0)} {{id = 0 : i64}}", "cannot be in the \"act\" stream"),
]  # fmt: skip


@pytest.mark.parametrize(("engine", "line", "message"), INVALID, ids=[m for _, _, m in INVALID])
def test_verifier_rejects(ctx: Context, engine: str, line: str, message: str) -> None:
    module = parse(ctx, module_text({engine: [line]}))
    with pytest.raises(VerifyException, match=re.escape(message)):
        module.verify()


def test_loc_attribute_rejects_unprintable_fields() -> None:
    with pytest.raises(VerifyException, match="start partition 128"):
        IsaLocAttr("sbuf", "float32", start_partition=128)
    with pytest.raises(VerifyException, match="only HBM locations have a variable id"):
        IsaLocAttr("psum", "float32", var_id=3)
    with pytest.raises(VerifyException, match="unknown dtype 'float64'"):
        IsaLocAttr("sbuf", "float64")
