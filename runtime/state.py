"""The simulated machine's state and operand access: a NeuronCore's memories, registers and semaphores, each
engine's instruction stream, HBM, and the views an operand's access pattern selects (runtime/ISA_FORMAT.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from nkic.runtime import rng, semantics as sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.neff import Neff, Variable
from nkic.target.instructions import LOOP_OPCODE_PAIRS, NUM_REGISTERS
from nkic.target.isa import Instr, Operand
from nkic.target.machine import ENGINES, NUM_PARTITIONS, NUM_SEMAPHORES, Target
from nkic.target.vocab import DTYPES


# Fresh memory is all-ones bytes: NaN in float32/bf16/fp16/fp8 at any alignment (a float32-NaN-only pattern would
# read as 0.0 in half of the bf16 lanes), and -1 / max in integer dtypes. The official simulator also NaN-fills.
_FILL_BYTE = 0xFF


def print_line(line: str) -> None:
    """Where DEBUG_PRINT's lines go by default: the process's stdout at the time of the print (as NKI's CPU
    simulator prints ``nl.device_print`` immediately), flushed so they interleave with the caller's own output."""
    print(line, flush=True)


class _Core:
    def __init__(self, index: int, target: Target, hbm: dict[int, np.ndarray]):
        self.index = index
        self.sbuf = np.full((NUM_PARTITIONS, target.sbuf_bytes_per_partition), _FILL_BYTE, np.uint8)
        self.psum = np.full((NUM_PARTITIONS, target.psum_bytes_per_partition), _FILL_BYTE, np.uint8)
        self.hbm = hbm
        # The per-partition accumulator registers of ScalarE and VectorE (reduce_cmd).
        self.act_regs = np.zeros(NUM_PARTITIONS, np.float32)
        self.dve_regs = np.zeros(NUM_PARTITIONS, np.float32)
        # The XORWOW state of each PRNG engine's lanes, (128, generators * 6) uint32; a NEFF load starts every
        # engine as if seeded with 0 (runtime/rng.py).
        self.rng_state = {e.name: rng.seed_states(0, NUM_PARTITIONS, e.rng_generators) for e in ENGINES
                          if e.rng_generators}  # fmt: skip
        self.sems = [0] * NUM_SEMAPHORES
        # The sequencers' 32-bit registers. Every engine executes each register instruction at the same barrier,
        # so their copies are always equal: one file per core stands for all of them. Register 0 reads as zero.
        self.regs = [0] * NUM_REGISTERS
        self.dma_in_flight = 0
        # The LNC=2 pair: every core of the run, by rank (set by simulate), and the tiles this core's sendrecvs
        # have sent, by pipe, while their exchange is being applied.
        self.pair: list[_Core] = [self]
        # Ranks (runtime/ranks.py): the rank running this program (core ``index`` of its rank's pair) and how many
        # ranks the launch has; the scheduler numbers core (rank r, program i) r * len(pair) + i.
        self.rank, self.ranks = 0, 1
        self.outbox: dict[int, np.ndarray] = {}
        # Output variable id -> one flag byte per byte of it, set by every write (shared by the cores, as hbm is):
        # which output elements the kernel wrote, for the coverage check after the run.
        self.written: dict[int, np.ndarray] = {}
        # DEBUG_PRINT: the NEFF's string table (its prefixes) and where a printed line goes (set by simulate).
        self.strings: tuple[str, ...] = ()
        self.on_print: Callable[[str], None] = print_line
        # The instruction this core is executing (set by the scheduler): a tensor indirection operand reads its
        # offsets from another slot of it.
        self.executing: Instr | None = None


# Elements one operand's offsets may hold before any array is built (an HBM operand may also cover its variable):
# a corrupted [step, num] pair must be an error, not gigabytes of offsets.
_MAX_PATTERN_ELEMENTS = 1 << 22


def _pattern_count(pairs: tuple[tuple[int, int], ...], cap: int = _MAX_PATTERN_ELEMENTS) -> int:
    count = 1
    for _, num in pairs:
        if num < 0:
            raise SimulationError(f"access pattern {list(map(list, pairs))} has a negative size")
        count *= num
    if count > cap:
        raise SimulationError(f"access pattern {list(map(list, pairs))} has {count} elements, more than the "
                              f"{cap} its memory can hold")  # fmt: skip
    return count


def _pattern_extent(address: int, itemsize: int, pairs: tuple[tuple[int, int], ...], limit: int, what: str) -> None:
    """Bounds-check a static pattern from its pairs alone (its lowest and highest byte), before offsets exist."""
    if _pattern_count(pairs) == 0:
        return
    lo = address + itemsize * sum(min(0, step * (num - 1)) for step, num in pairs)
    hi = address + itemsize * sum(max(0, step * (num - 1)) for step, num in pairs) + itemsize
    if lo < 0 or hi > limit:
        raise SimulationError(f"{what} access [{lo}, {hi}) outside 0..{limit}")


def _element_offsets(pairs: tuple[tuple[int, int], ...], cap: int = _MAX_PATTERN_ELEMENTS) -> np.ndarray:
    """Element offsets of a [step, num] pattern in row-major iteration order (at most ``cap`` of them)."""
    _pattern_count(pairs, cap)
    off = np.zeros(1, np.int64)
    for step, num in pairs:
        off = (off[:, None] + step * np.arange(num, dtype=np.int64)[None, :]).ravel()
    return off


@dataclass
class _View:
    """A resolved operand: byte coordinates into ``mem`` for every element. On-chip operands are (partitions, free
    elements); HBM operands are (outermost dim, remaining elements) of the variable's single byte row, so both
    exchange values as 2-D (nparts, free) arrays."""

    op: Operand
    mem: np.ndarray
    rows: np.ndarray  # broadcastable row index: (P, 1, 1) partitions, or (1, 1, 1) for HBM
    cols: np.ndarray  # byte column of every element byte: (1 or n0, free, itemsize)
    nparts: int
    free: int
    # Fast path: a strided (nparts, free * itemsize) byte view of ``mem`` when the pattern is dense per row.
    window: np.ndarray | None = None
    # An output variable's written-flags (_Core.written, shaped as ``mem``) and their window: store_raw sets them.
    written: np.ndarray | None = None
    written_window: np.ndarray | None = None

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.op.dtype]

    @property
    def partitions(self) -> np.ndarray:
        return self.rows.reshape(-1)

    def raw(self) -> np.ndarray:
        """Stored values, bit-exact, in the operand dtype."""
        if self.window is not None:
            return np.ascontiguousarray(self.window).view(self.dtype)
        data = np.ascontiguousarray(self.mem[self.rows, self.cols]).reshape(self.nparts, -1)
        return data.view(self.dtype)

    def f32(self) -> np.ndarray:
        return self.raw().astype(np.float32)

    def load(self, integer: bool) -> np.ndarray:
        return self.raw().astype(np.int64) if integer else self.f32()

    def store_raw(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype).reshape(self.nparts, self.free)
        if self.window is not None:
            self.window[...] = values.view(np.uint8).reshape(self.nparts, -1)
            if self.written_window is not None:
                self.written_window[...] = 1
            return
        self.mem[self.rows, self.cols] = values.view(np.uint8).reshape(self.nparts, self.free, -1)
        if self.written is not None:
            self.written[self.rows, self.cols] = 1

    def store(self, values: np.ndarray) -> None:
        """Cast engine results (float32 or int64) to the operand dtype and write them."""
        values = np.asarray(values)
        if values.size != self.nparts * self.free:
            raise SimulationError(f"writing {values.size} elements into an operand of shape {self.op.shape}")
        self.store_raw(sem.cast(values, self.op.dtype))


def _byte_cols(offsets: np.ndarray, itemsize: int) -> np.ndarray:
    return offsets[:, None] + np.arange(itemsize, dtype=np.int64)[None, :]


def _check_bounds(offsets: np.ndarray, itemsize: int, limit: int, what: str) -> None:
    if len(offsets) and (offsets.min() < 0 or offsets.max() + itemsize > limit):
        raise SimulationError(f"{what} access [{offsets.min()}, {offsets.max() + itemsize}) outside 0..{limit}")


def _resolve_onchip(core: _Core, op: Operand) -> _View:
    mem = core.sbuf if op.memory == "sbuf" else core.psum
    step, nparts = op.pattern[0]
    if step != 1:
        raise SimulationError(f"partition pair must be [1, nparts], got [{step}, {nparts}]")
    if nparts < 1 or op.start_partition + nparts > NUM_PARTITIONS:
        raise SimulationError(f"partitions {op.start_partition}..{op.start_partition + nparts - 1} out of range")
    _pattern_extent(op.address, op.itemsize, op.pattern[1:], mem.shape[1], op.memory)
    offsets = op.address + op.itemsize * _element_offsets(op.pattern[1:])
    _check_bounds(offsets, op.itemsize, mem.shape[1], op.memory)
    rows = (op.start_partition + np.arange(nparts, dtype=np.int64)).reshape(-1, 1, 1)
    view = _View(op, mem, rows, _byte_cols(offsets, op.itemsize)[None], nparts, len(offsets))
    if _dense(offsets, op.itemsize):
        lo = int(offsets[0])
        view.window = mem[op.start_partition : op.start_partition + nparts, lo : lo + len(offsets) * op.itemsize]
    return view


def _dense(offsets: np.ndarray, itemsize: int) -> bool:
    """Whether byte offsets are consecutive elements (so a slice can stand for the fancy index)."""
    return len(offsets) > 0 and bool(np.all(np.diff(offsets) == itemsize))


def _resolve_hbm(core: _Core, op: Operand) -> _View:
    buf = core.hbm.get(op.var_id)
    if buf is None:
        raise SimulationError(f"HBM operand references unknown variable id {op.var_id}")
    what = f"HBM variable {op.var_id}"
    _pattern_extent(op.address, op.itemsize, op.pattern, len(buf), what)
    offsets = op.address + op.itemsize * _element_offsets(op.pattern, max(len(buf), _MAX_PATTERN_ELEMENTS))
    _check_bounds(offsets, op.itemsize, len(buf), f"HBM variable {op.var_id}")
    outer = max(op.pattern[0][1], 1)
    cols = _byte_cols(offsets, op.itemsize).reshape(outer, -1, op.itemsize)
    view = _View(op, buf[None, :], np.zeros((1, 1, 1), np.int64), cols, outer, cols.shape[1])
    written = core.written.get(op.var_id)
    if written is not None:
        view.written = written[None, :]
    row = offsets[: cols.shape[1]]
    step = op.pattern[0][0] * op.itemsize
    if _dense(row, op.itemsize) and (outer == 1 or step >= len(row) * op.itemsize):
        # rows do not overlap, so writing through the strided view is exact
        view.window = np.lib.stride_tricks.as_strided(
            buf[int(row[0]) :], shape=(outer, len(row) * op.itemsize), strides=(max(step, 1), 1)
        )
        if written is not None:
            view.written_window = np.lib.stride_tricks.as_strided(
                written[int(row[0]) :], shape=(outer, len(row) * op.itemsize), strides=(max(step, 1), 1)
            )
    return view


def _rotated(core: _Core, op: Operand) -> Operand:
    """A register-offset operand (a rolled loop's ``+ c*r``) at this iteration's address: the register's value times
    the scale, in elements, added to the static address; the result is an ordinary static operand."""
    if not 0 <= op.dyn_ref < NUM_REGISTERS:
        raise SimulationError(f"dynamic offset register {op.dyn_ref} is not a register")
    shift = int(core.regs[op.dyn_ref]) * op.dyn_scale * op.itemsize
    return replace(op, address=op.address + shift, dyn="", dyn_ref=0, dyn_scale=0)


# Tensor indirection reads its offsets in a snake over groups of this many partitions of the index: "offset i comes
# from index[i % G, i // G] where G is the group size (16 for vector/scalar/gpsimd engines, 32 for tensor engine)"
# (nl NkiTensor.indirect).
_TI_GROUP = {"pe": 32}
_TI_GROUP_DEFAULT = 16


def _indirect_offsets(index: np.ndarray, group: int, count: int) -> np.ndarray:
    """The first ``count`` offsets of a (P, K) index tile in snake order: partition group after group (the last may
    be smaller), each read column by column (``index[g0 + i % G, i // G]`` within the group starting at ``g0``)."""
    blocks = [index[g : g + group].T.reshape(-1) for g in range(0, index.shape[0], group)]
    return np.concatenate(blocks)[:count].astype(np.int64)


def _resolve_indirect(core: _Core, op: Operand, what: str) -> _View:
    """A tensor indirection operand (runtime/ISA_FORMAT.md, "Dynamic operands", kind 4): column ``i`` on every
    partition is the element ``dyn_scale * offset_i`` from ``address``; a gather when read, a scatter when written
    (repeated offsets: the last column wins)."""
    ins = core.executing
    if ins is None or not 0 <= op.dyn_ref < len(ins.operands) or ins.operands[op.dyn_ref] is None:
        raise SimulationError(f"{what}: its tensor indirection index slot {op.dyn_ref} holds no operand")
    index = _resolve(core, ins.operands[op.dyn_ref], f"{what}'s index")
    (step, nparts), (_, count) = op.pattern
    if step != 1 or op.start_partition + nparts > NUM_PARTITIONS or index.nparts != nparts:
        raise SimulationError(f"{what}: a tensor indirection over partitions {op.start_partition}..+{nparts} needs "
                              f"an index of as many partitions, got {index.nparts}")  # fmt: skip
    offsets = _indirect_offsets(index.raw().astype(np.int64), _TI_GROUP.get(ins.engine, _TI_GROUP_DEFAULT), count)
    mem = core.sbuf if op.memory == "sbuf" else core.psum
    byte = op.address + op.itemsize * op.dyn_scale * offsets
    bad = np.flatnonzero((offsets < 0) | (byte + op.itemsize > mem.shape[1]))
    if len(bad):
        i = int(bad[0])
        raise SimulationError(f"{what}: tensor indirection offset {i} is {int(offsets[i])}, outside the "
                              f"{mem.shape[1]}-byte {op.memory} partition")  # fmt: skip
    rows = (op.start_partition + np.arange(nparts, dtype=np.int64)).reshape(-1, 1, 1)
    return _View(op, mem, rows, _byte_cols(byte, op.itemsize)[None], nparts, count)


def _resolve(core: _Core, op: Operand | None, what: str) -> _View:
    if op is None:
        raise SimulationError(f"missing {what} operand")
    if op.dyn == "reg":
        op = _rotated(core, op)
    if op.dyn == "indirect" and op.memory in ("sbuf", "psum"):
        return _resolve_indirect(core, op, what)
    if op.memory in ("sbuf", "psum"):
        return _resolve_onchip(core, op)
    if op.memory == "hbm":
        return _resolve_hbm(core, op)
    raise SimulationError(f"{what} operand cannot be a pattern-only (memory 'none') operand")


@dataclass
class _Engine:
    core: int
    name: str
    instrs: list[Instr]
    pc: int = 0
    busy: bool = False
    meeting: tuple | None = None  # the LNC meeting this engine waits at (_Scheduler._post)
    # LOOP_BEGIN <-> LOOP_END positions in this stream (structured control flow: a branch goes to its partner)
    partner: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        opened: list[int] = []
        closers = {end: begin for begin, end in LOOP_OPCODE_PAIRS.items()}
        for i, ins in enumerate(self.instrs):
            if ins.opcode in LOOP_OPCODE_PAIRS:
                opened.append(i)
            elif ins.opcode in closers:
                if not opened or self.instrs[opened[-1]].opcode != closers[ins.opcode]:
                    raise SimulationError(f"core {self.core} {self.name}[{i}] {ins.opcode} without a "
                                          f"{closers[ins.opcode]}")  # fmt: skip
                begin = opened.pop()
                self.partner[begin], self.partner[i] = i, begin
        if opened:
            begin = self.instrs[opened[-1]].opcode
            raise SimulationError(f"core {self.core} {self.name}[{opened[-1]}] {begin} without a "
                                  f"{LOOP_OPCODE_PAIRS[begin]}")  # fmt: skip

    @property
    def done(self) -> bool:
        return self.pc >= len(self.instrs)

    @property
    def at_barrier(self) -> bool:
        return not self.busy and not self.done and "control" in self.instrs[self.pc].spec.traits


def _input_buffer(var: Variable, value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != var.shape:
        raise ValueError(f"input '{var.name}' has shape {arr.shape}, expected {var.shape}")
    return np.ascontiguousarray(arr.astype(DTYPES[var.dtype])).reshape(-1).view(np.uint8).copy()


def _init_hbm(neff: Neff, inputs: Mapping[str, object], hbm_bytes: int,
              timing_only: bool = False) -> dict[int, np.ndarray]:  # fmt: skip
    total = sum(v.size for v in neff.variables)
    if total > hbm_bytes:  # before any buffer is allocated
        raise SimulationError(f"the NEFF's variables need {total} bytes, more than the {hbm_bytes} bytes of HBM")
    names = {v.name for v in neff.variables if v.kind == "input"}
    unknown = sorted(set(inputs) - names)
    if unknown:
        raise ValueError(f"unknown inputs {unknown}; the kernel takes {sorted(names)}")
    hbm: dict[int, np.ndarray] = {}
    for var in neff.variables:
        if timing_only and var.name not in inputs:
            # Zeros (pages the OS maps lazily): only registers loaded from memory read them; nothing else runs.
            hbm[var.var_id] = np.zeros(var.size, np.uint8)
        elif var.kind == "input":
            if var.name not in inputs:
                raise ValueError(f"missing input '{var.name}' (shape {var.shape}, dtype {var.dtype})")
            hbm[var.var_id] = _input_buffer(var, inputs[var.name])
        elif var.data is not None:  # a file variable (a constant): its bytes, loaded before the kernel starts
            hbm[var.var_id] = np.frombuffer(var.data, np.uint8).copy()
        else:
            hbm[var.var_id] = np.full(var.size, _FILL_BYTE, np.uint8)
    return hbm
