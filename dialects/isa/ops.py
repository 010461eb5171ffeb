"""The per-engine ISA dialects, generated: one op class per (opcode, engine) of ``nkic.target.isa.OPCODES``.

A concrete op is a name, an engine and its opcode spec; its properties are the spec's immediates and flags. The few
opcodes with rules beyond the spec's generic checks have a format class below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, IntegerAttr
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import irdl_op_definition, opt_prop_def
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.fastverify import fast_verify
from nkic.dialects.isa.base import IsaInst, byte_range, imm_prop_def
from nkic.dialects.isa.verify_memo import memo_verify
from nkic.target.instructions import (
    INSTRUCTIONS,
    LOCAL_GATHER_ELEMS,
    SHUFFLE_KEEP,
    SHUFFLE_MASK_WORDS,
    SHUFFLE_QUADRANT,
    activate2_problem,
    core_barrier_problem,
    mask_cores,
    sendrecv_problem,
    matmul_tile_problem,
    shuffle_start_problem,
    unpack_shuffle_mask,
)
from nkic.target.collectives import COLLECTIVE_OPCODES
from nkic.target.isa import OPCODES, Instr, OpSpec
from nkic.target.vocab import DTYPES
from nkic.target.machine import ENGINES, MAX_MATMUL_N, NUM_DMA_QUEUES, TARGETS, queue_sem

__all__ = ["FORMATS", "ENGINE_DIALECTS", "ISA_OPS", "isa_op"]

_PSUM_BANK_BYTES = min(t.psum_bank_bytes for t in TARGETS.values())


class DmaCopyFormat(IsaInst):
    """DMA triggers: the queue must exist, and the queue (not SP) signals when the transfer completes."""

    def queue_index(self) -> int:
        queue = int(self.field("queue"))
        if not 0 <= queue < NUM_DMA_QUEUES:
            raise VerifyException(f"DMA queue {queue} outside 0..{NUM_DMA_QUEUES - 1}")
        return queue

    def signalled_sem(self) -> int:
        return queue_sem(self.queue_index())

    def verify_format(self) -> None:
        super().verify_format()
        self.queue_index()
        dst, src = self.ap("dst"), self.ap("src")
        if dst.num_elements != src.num_elements:
            raise VerifyException(f"DMA element counts differ: dst {dst.shape}, src {src.shape}")
        if self.flag("transpose"):
            want = (src.shape[-1], *src.shape[1:-1], src.shape[0])
            if not 2 <= len(src.shape) <= 4 or dst.shape != want:
                raise VerifyException(
                    f"transposing DMA needs 2-D to 4-D operands with dst = src with its first and last dims "
                    f"swapped, got {dst.shape}, {src.shape}"
                )


class DmaComputeFormat(DmaCopyFormat):
    """A DMA trigger like DMA_COPY (queue, queue semaphore); every source has dst's element count."""

    def verify_format(self) -> None:
        self.queue_index()
        IsaInst.verify_format(self)  # the declaration's dims rule: equal element counts


class DebugPrintFormat(DmaCopyFormat):
    """DEBUG_PRINT: a DMA trigger (queue, queue semaphore) whose destination is the host's debug stream."""

    def verify_format(self) -> None:
        self.queue_index()
        IsaInst.verify_format(self)


class CollectiveFormat(DmaCopyFormat):
    """A collective between ranks (target/collectives.py): a DMA trigger (queue, queue semaphore) whose transfer
    waits for its replica group; its operands follow the group size, not one another."""

    def verify_format(self) -> None:
        self.queue_index()
        IsaInst.verify_format(self)


class LocalGatherFormat(IsaInst):
    """dst holds num_valid_indices x num_elem_per_idx elements per partition (the fields the dims rule cannot see)."""

    def verify_format(self) -> None:
        super().verify_format()
        per_idx, valid = int(self.field("num_elem_per_idx") or 1), int(self.field("num_valid_indices") or 0)
        if per_idx not in LOCAL_GATHER_ELEMS:
            raise VerifyException(f"num_elem_per_idx must be one of {LOCAL_GATHER_ELEMS}, got {per_idx}")
        if self.dims("dst")[1] != valid * per_idx:
            raise VerifyException(f"local_gather of {valid} indices x {per_idx} elements writes {valid * per_idx} "
                                  f"elements per partition, dst has {self.dims('dst')[1]}")  # fmt: skip


class NcStreamShuffleFormat(IsaInst):
    """Every mask entry picks a partition of the quadrant or keeps its output (255)."""

    KEY_LOCS: ClassVar[bool] = True  # verify_format reads the locations

    def verify_format(self) -> None:
        super().verify_format()
        words = tuple(int(self.field(f"mask{w}") or 0) for w in range(SHUFFLE_MASK_WORDS))
        bad = [m for m in unpack_shuffle_mask(words) if m >= SHUFFLE_QUADRANT and m != SHUFFLE_KEEP]
        if bad:
            raise VerifyException(f"shuffle mask entries must be 0..{SHUFFLE_QUADRANT - 1} or {SHUFFLE_KEEP}, got {bad}")
        starts = {r: self.loc(r).start for r in ("src", "dst")}
        problem = shuffle_start_problem(self.dims("src")[0], self.dims("dst")[0], starts)
        if problem is not None:
            raise VerifyException(problem)


class MatmulFormat(IsaInst):
    """Contraction shapes agree, N is within the largest target's limit, and a bank-sized result stays in a bank."""

    LOC_RULES: ClassVar[tuple[str, ...]] = ("verify_banks",)  # the one rule of verify_format that reads locations

    def verify_format(self) -> None:
        (m, n), (k, m_st), (k_mv, n_mv) = self.dims("dst"), self.dims("stationary"), self.dims("moving")
        pack = 2 if self.field("double_row") else 1  # double_row contracts K and a dim of 2: free sizes 2M, 2N
        if k != k_mv or pack * m != m_st or pack * n != n_mv:
            raise VerifyException(f"matmul shapes: stationary {k}x{m_st}, moving {k_mv}x{n_mv}, dst {m}x{n}")
        problem = matmul_tile_problem(self.field, k, m)
        if problem is not None:
            raise VerifyException(problem)
        # v4: "up to 4096 for float32 dst or 8192 for bfloat16 dst" (the entire PSUM: its bytes are the location
        # check's); the bound per generation is the documented rule's, asked at the nisa call and in penguin
        if n > 2 * MAX_MATMUL_N:
            raise VerifyException(f"matmul free size {n} exceeds {2 * MAX_MATMUL_N}")
        self.verify_banks()

    def verify_banks(self) -> None:
        lo, hi = byte_range(self.loc("dst"), self.ap("dst"))
        if hi - lo <= _PSUM_BANK_BYTES:
            if lo // _PSUM_BANK_BYTES != (hi - 1) // _PSUM_BANK_BYTES:
                raise VerifyException(
                    f"matmul dst bytes [{lo:#x}, {hi:#x}) cross a {_PSUM_BANK_BYTES}-byte PSUM bank"
                )
        elif lo % _PSUM_BANK_BYTES:
            raise VerifyException(f"a multi-bank matmul dst must start on a bank, got {lo:#x}")


class MatmulMxFormat(MatmulFormat):
    """The shapes are the declaration's dims_rule (checked by IsaInst); a bank-sized result stays in a bank."""

    def verify_format(self) -> None:
        IsaInst.verify_format(self)
        self.verify_banks()


class TensorScalarFormat(IsaInst):
    """The second stage (op1, operand1, reverse1) is all there or not at all."""

    @classmethod
    def decode_fields(cls, instr: Instr, strings: Sequence[str] | None = None) -> dict[str, Attribute]:
        fields = super().decode_fields(instr, strings)
        if not instr.flag("has_op1"):
            # Without op1 the op1/operand1 words are unused padding.
            fields.pop("op1", None)
            fields.pop("operand1", None)
        return fields

    def verify_format(self) -> None:
        has_second = self.has("operand1") or "operand1" in self.properties or self.flag("reverse1")
        if "op1" not in self.properties and has_second:
            raise VerifyException("operand1/reverse1 given without op1")
        if "op1" in self.properties and not (self.has("operand1") or "operand1" in self.properties):
            raise VerifyException("op1 needs operand1 (a tensor or an immediate)")
        super().verify_format()


class TensorReduceFormat(IsaInst):
    def verify_format(self) -> None:
        free_dims = self.ap("src").shape[1:]
        k = int(self.field("num_reduced_dims") or 0) or len(free_dims)
        if k > len(free_dims):
            raise VerifyException(f"cannot reduce {k} trailing dims of {len(free_dims)} free dims")
        kept = math.prod(free_dims[: len(free_dims) - k])
        (dp, df), sp = self.dims("dst"), self.dims("src")[0]
        if (dp, df) != (sp, kept):
            raise VerifyException(f"tensor_reduce dst is {(dp, df)}, expected {(sp, kept)}")


class MemsetFormat(IsaInst):
    def verify_format(self) -> None:
        value = self.field("value")
        # int32 only: the decoder reads the word back as signed, so u32 values above 2**31 would not round-trip.
        if isinstance(self.properties.get("value"), IntegerAttr) and not -(1 << 31) <= int(value) < (1 << 31):
            raise VerifyException(f"memset value {value} does not fit in int32")


class Activate2Format(IsaInst):
    """The tensor-scalar stage is one of ScalarE's (op0, op1) pairs; an accumulating reduce_cmd has a reduce_op."""

    def verify_format(self) -> None:
        problem = activate2_problem(self.field)
        if problem is not None:
            raise VerifyException(problem)
        super().verify_format()


class SendrecvFormat(IsaInst):
    """Ranks of the LNC=2 pair, one dtype on both sides, and gpsimd_dma only on GpSimd within its size limit."""

    KEY_LOCS: ClassVar[bool] = True  # verify_format reads the locations

    def verify_format(self) -> None:
        super().verify_format()
        src, dst = self.loc("src"), self.loc("dst")
        if src is not None and dst is not None and src.dt != dst.dt:
            raise VerifyException(f"sendrecv cannot cast: src is {src.dt}, dst is {dst.dt}")
        itemsize = DTYPES[src.dt].itemsize if src is not None else None
        problem = sendrecv_problem(self.field, itemsize, self.dims("src")[1])
        if problem is not None:
            raise VerifyException(problem)
        if self.flag("gpsimd_dma") and self.ENGINE != "pool":
            raise VerifyException(f"sendrecv with gpsimd_dma runs on pool (GpSimd's own DMA), not {self.ENGINE}")


class CoreBarrierFormat(IsaInst):
    """core_mask names one or both cores of the LNC=2 pair."""

    def verify_format(self) -> None:
        super().verify_format()
        problem = core_barrier_problem(mask_cores(int(self.field("core_mask") or 0)))
        if problem is not None:
            raise VerifyException(problem)


class SemWaitFormat(IsaInst):
    def verify_format(self) -> None:
        if "wait_sem" not in self.properties:
            raise VerifyException(f"'{self.name}' requires wait_sem")


FORMATS: dict[str, type[IsaInst]] = {
    "DMA_COPY": DmaCopyFormat, "MATMUL": MatmulFormat, "MATMUL_MX": MatmulMxFormat,
    "TENSOR_SCALAR": TensorScalarFormat, "TENSOR_REDUCE": TensorReduceFormat, "MEMSET": MemsetFormat,
    "SEM_WAIT": SemWaitFormat, "DMA_COMPUTE": DmaComputeFormat, "LOCAL_GATHER": LocalGatherFormat,
    "NC_STREAM_SHUFFLE": NcStreamShuffleFormat, "ACTIVATE2": Activate2Format, "SENDRECV": SendrecvFormat,
    "CORE_BARRIER": CoreBarrierFormat, "DEBUG_PRINT": DebugPrintFormat,
    **{opcode: CollectiveFormat for opcode in COLLECTIVE_OPCODES},
}  # fmt: skip


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def _op_class(spec: OpSpec, engine: str) -> type[IsaInst]:
    base = FORMATS.get(spec.mnemonic, IsaInst)
    body: dict[str, object] = {
        "name": f"isa_{engine}.{spec.key}",
        "SPEC": spec,
        "ENGINE": engine,
        "MNEMONIC": spec.mnemonic,
        "ROLES": spec.slots,
        "REQUIRED": spec.required,
        "IMMS": spec.imms,
        "FLAGS": spec.flags,
        "DERIVED_FLAGS": spec.derived_flags,
        "DIMS_RULES": tuple(s for s in INSTRUCTIONS.values() if s.opcode == spec.mnemonic and s.dims_rule),
        "INSTR_SPECS": tuple(s for s in INSTRUCTIONS.values() if s.opcode == spec.mnemonic),
        "__doc__": f"``{spec.mnemonic}`` on {engine}: {spec.doc}.",
        "__annotations__": {k: ClassVar[object] for k in ("SPEC", "ENGINE", "MNEMONIC", "ROLES", "REQUIRED", "IMMS",
                                                          "FLAGS", "DERIVED_FLAGS", "DIMS_RULES",
                                                          "INSTR_SPECS")},
    }  # fmt: skip
    body.update({imm.prop: imm_prop_def(imm) for imm in spec.imms})
    body.update({f: opt_prop_def(BoolAttr) for f in spec.flags if f not in spec.derived_flags})
    return memo_verify(fast_verify(irdl_op_definition(type(_camel(engine) + _camel(spec.key) + "Op", (base,), body))))


ISA_OPS: dict[tuple[str, str], type[IsaInst]] = {
    (engine, spec.key): _op_class(spec, engine) for spec in OPCODES.values() for engine in spec.engines
}


def isa_op(engine: str, mnemonic: str) -> type[IsaInst] | None:
    """The op class of opcode ``mnemonic`` (e.g. ``"ACTIVATE"``) on ``engine``, None when it cannot run there."""
    return ISA_OPS.get((engine, mnemonic.lower()))


ENGINE_DIALECTS: dict[str, Dialect] = {
    e.name: Dialect(f"isa_{e.name}", [op for (eng, _), op in ISA_OPS.items() if eng == e.name]) for e in ENGINES
}
