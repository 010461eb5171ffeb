"""``nki.isa`` (nisa): the instructions, with NKI 0.3+ dst-first signatures.

Each instruction validates its operands on the views it is given — so errors name the user's line — and records one
penguin instruction through ``TraceContext.inst``. Keyword calls of every NKI version are accepted; stray keywords
(``dtype=``, ``name=``, ``priority=`` …) are tolerated and ignored; ``mask=`` restricts the instruction to the
mask's box of its operands (``frontend/grid.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

import numpy as np

from nkic.frontend import control
from nkic.frontend.affine import is_symbolic
from nkic.frontend.control import VirtualRegister
from nkic.frontend.context import active_context, is_nki_op, nki_op
from nkic.frontend.grid import masked
from nkic.frontend.errors import NkiError
from nkic.frontend.ops import act_func, alu_op
from nkic.frontend.tensor import NkiTensor
from nkic.frontend.instruction import NkiInstruction  # noqa: F401  (nisa.NkiInstruction, what nisa calls return)
from nkic.frontend.unsupported import missing_names
from nkic.target.instructions import (
    DMA_COMPUTE_MAX_SRCS,
    DMA_COMPUTE_RMW_SRCS,
    LNC_MAX_RANKS,
    GPSIMD_CORE_PARTITIONS,
    GPSIMD_GROUP,
    INSTRUCTIONS,
    SHUFFLE_KEEP,
    SHUFFLE_QUADRANT,
    TOPK_MAX_N,
    InstrSpec,
    Role,
    activate2_problem,
    available_on,
    first_generation,
    sendrecv_problem,
    dims_problem,
    engine_problem,
    legal_engines,
)
from nkic.target.machine import (
    ENGINE_BY_NAME,
    ENGINE_OF_HINT,
    NKI_ENGINES,
    Target,
    get_target,
)
from nkic.target.rules import RULES, Call, Operand, problems
from nkic.target.rules import message as rule_message
from nkic.target.vocab import PACKED_DTYPES, REDUCE_CMDS


# -- enums --------------------------------------------------------------------------------------------------
engine = Enum("engine", [(name, NKI_ENGINES.code(name)) for name in NKI_ENGINES])  # type: ignore[misc]

unknown_engine, tensor_engine, scalar_engine = engine.unknown, engine.tensor, engine.scalar
gpsimd_engine, vector_engine = engine.gpsimd, engine.vector

reduce_cmd = Enum("reduce_cmd", [(name, REDUCE_CMDS.code(name)) for name in REDUCE_CMDS])  # type: ignore[misc]


_ENGINE, _REDUCE_CMD = engine, reduce_cmd  # the instruction parameters named `engine`/`reduce_cmd` shadow these


class nc_version(Enum):
    """NeuronCore generations, ordered (``get_nc_version() >= nc_version.gen3``) but not equal to ints."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def __lt__(self, other: Any) -> bool:
        return self.value < other.value if isinstance(other, nc_version) else NotImplemented

    def __le__(self, other: Any) -> bool:
        return self.value <= other.value if isinstance(other, nc_version) else NotImplemented

    def __gt__(self, other: Any) -> bool:
        return self.value > other.value if isinstance(other, nc_version) else NotImplemented

    def __ge__(self, other: Any) -> bool:
        return self.value >= other.value if isinstance(other, nc_version) else NotImplemented


class dge_mode(Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(Enum):
    error = 0
    skip = 1


_OOB_MODE = oob_mode  # dma_compute's parameter named `oob_mode` shadows the enum
_DGE = dge_mode  # the DMA functions' parameter named `dge_mode` shadows the enum


class matmul_perf_mode(Enum):
    none = 0
    double_row = 1


class dma_engine(Enum):
    dma = 1
    gpsimd_dma = 2


def get_nc_version() -> nc_version:
    """The compile target of the running trace (outside a trace: the default target, gen3 unless overridden)."""
    ctx = active_context()
    if ctx is not None:
        return nc_version[ctx.options.target]
    from nkic.frontend.tracer import default_target

    return nc_version[default_target()]


def get_nc_sub_version() -> int:
    """The silicon revision within the target's generation: nkic models the first revision of each (0)."""
    return 0


class NkiValidationError(NkiError):
    """A hardware constraint violated by an instruction's operands (nkic raises NkiError, of which this is a kind)."""


# -- validation helpers -------------------------------------------------------------------------------------
def _target(ctx: Any) -> Target:
    return get_target(ctx.options.target)



def _tensor(op: str, role: str, value: Any) -> NkiTensor:
    if not isinstance(value, NkiTensor):
        raise NkiError(f"{op}: '{role}' must be a tensor, got {type(value).__name__}")
    return value


def _on_chip(op: str, role: str, t: NkiTensor) -> None:
    if not t.on_chip:
        raise NkiError(f"{op}: '{role}' must be in SBUF or PSUM, not {t.buffer}", "dma_copy it on chip first")


def _in(op: str, role: str, t: NkiTensor, *buffers: str) -> None:
    if str(t.buffer) not in buffers:
        raise NkiError(f"{op}: '{role}' must be in {' or '.join(b.upper() for b in buffers)}, not {t.buffer}")


def _in_sbuf_not_psum(op: str, role: str, t: NkiTensor) -> None:
    """A PSUM tile given to a GpSimd-only instruction whose reference requires SBUF (nisa.affine_select; the rule
    itself is target/rules/vector.py's): the reference's reason, and the copy that fixes it (nki-library's
    attention_cte copies the Q·Kᵀ scores out of PSUM with nisa.tensor_copy before its causal affine_select)."""
    fix = ("copy the PSUM tile to SBUF first with nisa.tensor_copy (VectorE and ScalarE read PSUM), then select from "
           "the copy" if role != "dst" else "give it a dst in SBUF, and copy the result to PSUM if it must be there")
    raise NkiError(
        f"{op}: '{role}' must be in SBUF, not psum",
        f"the NKI ISA reference: nisa.{op} runs on the GpSimd engine, its tiles must be in SBUF, and GpSimd cannot "
        f"access PSUM on any NeuronCore generation. {fix}",
    )


def _partitions_agree(op: str, tensors: dict[str, NkiTensor | None]) -> None:
    given = [(r, t) for r, t in tensors.items() if t is not None]
    first_role, first = given[0]
    for role, t in given[1:]:
        if t.partitions != first.partitions:
            raise NkiError(
                f"{op}: partition count mismatch: '{first_role}' has {first.partitions} partitions, "
                f"'{role}' has {t.partitions}"
            )


def _free_agree(op: str, a_role: str, a: NkiTensor, b_role: str, b: NkiTensor) -> None:
    if a.free_size != b.free_size:
        raise NkiError(
            f"{op}: '{a_role}' has {a.free_size} elements per partition but '{b_role}' has {b.free_size}"
        )


def _scalar(op: str, role: str, value: Any, dst: NkiTensor) -> tuple[NkiTensor | None, float | None]:
    """A scalar operand: an immediate (returned as float) or a (P, 1) tile."""
    if isinstance(value, NkiTensor):
        _on_chip(op, role, value)
        if value.free_size != 1 or value.partitions != dst.partitions:
            raise NkiError(f"{op}: '{role}' must be a ({dst.partitions}, 1) tile, got shape {value.shape}")
        return value, None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None, float(value)
    if isinstance(value, (np.integer, np.floating)):  # a numpy scalar (np.float32(0.0)) is a number too
        return None, float(value)
    if is_symbolic(value):
        return None, float(value)  # needs the concrete value: the loop unrolls
    raise NkiError(f"{op}: '{role}' must be a number or a (P, 1) tile, got {type(value).__name__}")


def _scalar_value(op: str, role: str, value: Any) -> tuple[NkiTensor | None, float | None]:
    """A scalar operand whose (P, 1) shape a documented rule states (``target/rules``): an immediate or a tile."""
    if isinstance(value, NkiTensor):
        return value, None
    return _scalar(op, role, value, None)  # type: ignore[arg-type]  # a number: no tile to compare with


def _enum(value: Any, cls: type[Enum], what: str) -> str:
    if isinstance(value, cls):
        return value.name
    if isinstance(value, str) and value in cls.__members__:
        return value
    if value is None and "unknown" in cls.__members__:
        return "unknown"
    if isinstance(value, int) and not isinstance(value, bool) and value in {m.value for m in cls}:
        return cls(value).name  # the member's integer value, as NKI's int-valued enums accept (nki-library does)
    raise NkiError(f"invalid {what} {value!r}", f"use nisa.{cls.__name__}.<member>")


def _mask(kwargs: dict[str, Any]) -> None:
    """A mask reaching an instruction's body was not applied (``_take_masks`` strips it first): never ignore one."""
    if kwargs.get("mask") is not None:
        raise NkiError("mask= is not supported here", "express predicates with nisa.affine_select")


def _record(
    ctx: Any, op: str, operands: dict[str, NkiTensor | None], attrs: dict[str, Any], engine_name: str = ""
) -> None:
    """Checks shared by every instruction, then one penguin instruction."""
    target = _target(ctx)
    if not _available(target, op):
        # the reference's sentence where it states the generation (target/rules: unavailable), else the declaration
        _enforce(Call(op, {}, {}, target.nc_version, getattr(ctx, "_api_call", "")))
        first = first_generation(op)
        raise NkiError(
            f"nisa.{INSTRUCTIONS[op].nki_name or op} is not available on {target.name}",
            f"it needs {first} or newer" if first else "",
        )
    spec = INSTRUCTIONS[op]
    if any(t is not None and t.dyn is not None for t in operands.values()):
        operands = _with_index_operands(ctx, op, operands)
    given = {r: t for r, t in operands.items() if t is not None}
    dst = operands.get("dst")
    bank = target.psum_bank_bytes
    _packed_operands(op, operands)
    if op in RULES and getattr(ctx, "_api_call", "").startswith("nisa."):
        _documented_rules(ctx, target, op, given, attrs)  # first: the message cites the reference's sentence
    # what the declaration states beyond the documented sentences (and, for an nl function's instruction, all of it)
    roles = _role_table(op)
    for role, t in given.items():
        _declared_role(op, roles[role], t, dst)
    if spec.dims_rule is not None:
        problem = dims_problem(spec, {r: (t.partitions, t.free_size) for r, t in given.items()})
        if problem is not None:
            raise NkiError(problem)
    _engine_check(target, op, given, attrs, ENGINE_OF_HINT.get(engine_name, ""))
    for role, t in given.items():
        if not t.storage.buffer == "psum":
            continue
        spans_banks = op in ("matmul", "matmul_mx") and role == "dst" and target.matmul_spans_banks
        if t.free_size * t.itemsize > bank and not spans_banks:
            raise NkiError(
                f"{op}: PSUM tile '{role}' needs {t.free_size * t.itemsize} bytes per partition, "
                f"more than one {bank}-byte bank",
                f"split the PSUM tile into bank-sized ({bank} bytes per partition) views",
            )
    ctx.inst(op, given, attrs)


def _engine_check(target: Target, op: str, given: dict[str, NkiTensor], attrs: dict[str, Any], engine: str) -> None:
    """``engine=`` must be one the declaration allows on this generation, for these operands' memories and ALU ops
    (``target.instructions.engine_problem``, what assign-engines and the ISA verifier ask too); with no engine
    given, some engine must be able to run it."""
    spec = INSTRUCTIONS[op]
    memories = {r: getattr(t.storage.buffer, "name", str(t.storage.buffer)) for r, t in given.items()}
    fields = {f.name: attrs.get(f.name) for f in spec.fields if f.kind == "alu"}
    if engine and engine != "unassigned":
        problem = engine_problem(spec, engine, target.nc_version, memories, fields)
        if problem is not None:
            raise NkiError(f"{op}: engine={ENGINE_BY_NAME[engine].nki} is not allowed: {problem}",
                           f"use one of {', '.join(_nki_engines(spec, target))} or leave engine unset")  # fmt: skip
    elif not legal_engines(spec, target.nc_version, memories, fields):
        problems = [engine_problem(spec, e, target.nc_version, memories, fields) for e in spec.engines]
        raise NkiError(f"{op}: no engine can run it here: {'; '.join(p for p in problems if p)}")


def _nki_engines(spec: InstrSpec, target: Target) -> list[str]:
    return [f"nisa.engine.{ENGINE_BY_NAME[e].nki}" for e in spec.engines_on(target.nc_version)]


def _documented_rules(ctx: Any, target: Target, op: str, given: dict[str, NkiTensor], attrs: dict[str, Any]) -> None:
    """The reference's restrictions on this call (``nkic.target.rules``), for the ``nisa`` function the user
    called. An instruction an ``nl`` function emits is nkic's lowering, not the user's choice: the rules are the
    lowering's to keep (the penguin verifier checks them), not an error at the user's line."""
    operands = {r: _rule_operand(t) for r, t in given.items()}
    _enforce(Call(op, operands, attrs, target.nc_version, getattr(ctx, "_api_call", "")))


def language_rules(ctx: Any, fn: str, operands: dict[str, Any], **fields: Any) -> None:
    """The reference's restrictions on ``nl.<fn>`` itself (``target/rules/language.py``), asked by its
    implementation: the tiles among ``operands`` and the call's other arguments as ``fields`` (``ctx`` None: the
    generation is not known, so only rules of every generation apply)."""
    tiles = {r: _rule_operand(t) for r, t in operands.items() if isinstance(t, NkiTensor)}
    _enforce(Call(f"nl.{fn}", tiles, fields, _target(ctx).nc_version if ctx is not None else None, f"nl.{fn}"))


def _api_rules(ctx: Any, op: str, facts: dict[str, Any]) -> None:
    """The reference's restrictions on what no instruction field holds (a tensor's rank): the rules of ``op`` for
    the ``nisa`` function called, asked with those ``facts`` as the call's fields."""
    _enforce(Call(op, {}, facts, _target(ctx).nc_version, getattr(ctx, "_api_call", "")))


def _rule_operand(t: NkiTensor) -> Operand:
    """A tile as the documented rules see it: memory, dtype, (partitions, elements per partition)."""
    return Operand(t.buffer.name, t.dtype, (t.partitions, t.free_size))


def _enforce(call: Call) -> None:
    """The first documented rule ``call`` breaks, as an NkiError at the user's line."""
    broken = problems(call)
    if broken:
        raise NkiError(rule_message(call, broken[0]))


def _rules(ctx: Any, op: str, given: dict[str, NkiTensor | None], facts: dict[str, Any]) -> None:
    """The reference's restrictions on this call, asked before the instruction is built: its operands, and as the
    call's fields what the IR does not keep (raw parameters, full shapes; ``target/rules/pe.py``). Asked for the
    ``nl`` functions' instructions too: these were the call's own checks before they were rules."""
    _documented_rules(ctx, _target(ctx), op, {r: t for r, t in given.items() if t is not None}, facts)


# (nc_version, instruction) pairs Target.has said yes to (it depends on nothing else, and imports the declarations
# on every call); a no is asked again (it is an error anyway, and a declaration may yet be added).
_AVAILABLE: set[tuple[int, str]] = set()


def _available(target: Target, op: str) -> bool:
    key = (target.nc_version, op)
    if key in _AVAILABLE:
        return True
    if available_on(op, target):
        _AVAILABLE.add(key)
        return True
    return False


# op -> its declared roles by name (InstrSpec.role searches the tuple; _record asks for every operand)
_ROLE_TABLES: dict[str, dict[str, Role]] = {}


def _role_table(op: str) -> dict[str, Role]:
    table = _ROLE_TABLES.get(op)
    if table is None:
        table = _ROLE_TABLES[op] = {r.name: r for r in INSTRUCTIONS[op].roles}
    return table


def _with_index_operands(ctx: Any, op: str, operands: dict[str, NkiTensor | None]) -> dict[str, NkiTensor | None]:
    """A dynamic (``.ap(scalar_offset=, vector_offset=)``) operand brings its index tensor as the declaration's
    ``<role>_offset`` operand; only roles declared ``indirect`` take one."""
    out = dict(operands)
    spec = INSTRUCTIONS[op]
    for role, t in operands.items():
        if t is None or t.dyn is None:
            continue
        if not spec.role(role).indirect:
            raise NkiError(f"nisa.{spec.nki_name or op}: '{role}' cannot be a dynamic access pattern "
                           "(scalar_offset / vector_offset)", "only DMA operands can be indirect")  # fmt: skip
        if t.dyn.kind == "reg":
            if t.dyn.register._owner is not ctx._owner:
                raise NkiError(f"{op}: register r{t.dyn.register.number} belongs to another trace or SPMD program")
        else:
            out[spec.role(role).offset_role] = t.dyn.index
    return out


# Instructions that may touch packed MX data (_x4 dtypes): the MX instructions, and DMAs that move the words (a
# sendrecv is a DMA between the pair's cores; it moves raw bytes and already requires one dtype), and memset with
# 0 (memset checks the value): all-zero words, every element +0 (nki-library zero-pads MX weight tiles so).
_PACKED_OK = frozenset({"quantize_mx", "matmul_mx", "dma_copy", "dma_transpose", "sendrecv", "memset"})


def _packed_operands(op: str, operands: dict[str, NkiTensor | None]) -> None:
    """Packed MX words are not numbers an engine can compute with: only the MX instructions read them, and a DMA
    moves them only as themselves (no cast through fp32)."""
    packed = {r: t.dtype for r, t in operands.items() if t is not None and t.dtype in PACKED_DTYPES}
    if not packed:
        return
    role, dt = next(iter(packed.items()))
    if op not in _PACKED_OK:
        raise NkiError(
            f"{INSTRUCTIONS[op].nki_name or op}: '{role}' has the packed MX dtype {dt}",
            "packed MX data is read by nisa.nc_matmul_mx only; view it as an integer dtype to move it",
        )
    if op.startswith("dma") and len({t.dtype for t in operands.values() if t is not None}) > 1:
        raise NkiError(f"{op}: cannot convert packed MX data ({dt}) to another dtype", "copy it as the same dtype")


def _declared_role(op: str, role: Role, t: NkiTensor, dst: NkiTensor | None) -> None:
    """What the declaration says of a role: its memory spaces, and (P, 1) for a scalar tile."""
    if str(t.buffer) not in role.memories:
        where = " or ".join(m.upper() for m in role.memories)
        hint = "dma_copy it on chip first" if not t.on_chip and "sbuf" in role.memories else ""
        raise NkiError(f"{op}: '{role.name}' must be in {where}, not {t.buffer}", hint)
    if role.scalar and dst is not None and (t.free_size != 1 or t.partitions != dst.partitions):
        raise NkiError(f"{op}: '{role.name}' must be a ({dst.partitions}, 1) tile, got shape {t.shape}")


# -- data movement ------------------------------------------------------------------------------------------
@nki_op
def dma_copy(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    priority: Any = None,
    oob_mode: Any = None,
    dge_mode: Any = None,
    engine: Any = None,
    name: Any = None,
    **kw: Any,
) -> None:
    """``dst = src`` between HBM and SBUF (element counts equal, shapes may differ, dtype cast through fp32).

    Either side may be a dynamic ``.ap(scalar_offset=, vector_offset=)`` view (gather / scatter); ``oob_mode=skip``
    leaves out the rows whose run-time address falls outside their tensor instead of failing. ``dge_mode`` and the
    HWDGE ``engine`` are checked as NKI documents them; nkic models one DMA path, so they do not change the
    program."""
    _mask(kw)
    dst, src = _tensor("dma_copy", "dst", dst), _tensor("dma_copy", "src", src)
    for role, t in (("dst", dst), ("src", src)):
        if t.buffer == "psum":
            raise NkiError(f"dma_copy: '{role}' cannot be in PSUM", "copy PSUM to SBUF with nisa.tensor_copy first")
    skip = _dma_modes(ctx, "dma_copy", priority, oob_mode, dge_mode, engine)
    _rules(ctx, "dma_copy", {"dst": dst, "src": src}, {
        "priority": priority, "dge_mode": _enum(dge_mode if dge_mode is not None else "unknown", _DGE, "dge_mode"),
        "hwdge_engine": _enum(engine, _ENGINE, "engine")})  # fmt: skip
    _record(ctx, "dma_copy", {"dst": dst, "src": src}, {"oob_skip": skip or None})


def _dma_modes(ctx: Any, op: str, priority: Any, oob: Any, dge: Any, eng: Any = None) -> bool:
    """Check a DMA's ``priority`` / ``oob_mode`` / ``dge_mode`` / ``engine`` values (which generation and mode they
    need are rules: ``target/rules/pe.py``); True for ``oob_mode.skip``."""
    _enum(dge if dge is not None else "unknown", dge_mode, "dge_mode")
    hw = _enum(eng, _ENGINE, "engine")
    if hw not in ("unknown", "sync", "scalar"):
        raise NkiError(f"{op}: the HWDGE engine must be nisa.engine.sync or nisa.engine.scalar, got {hw}")
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3:
            raise NkiError(f"{op}: priority must be an int 0..3, got {priority!r}")
    return _enum(oob if oob is not None else "error", oob_mode, "oob_mode") == "skip"


@nki_op
def dma_transpose(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    axes: Sequence[int] | None = None,
    priority: Any = None,
    dge_mode: Any = None,
    oob_mode: Any = None,
    name: Any = None,
    **kw: Any,
) -> None:
    """``dst = src.transpose(axes)`` by DMA; dst in SBUF; src may be a dynamic (gather) view."""
    _mask(kw)
    skip = _dma_modes(ctx, "dma_transpose", priority, oob_mode, dge_mode)
    dst, src = _tensor("dma_transpose", "dst", dst), _tensor("dma_transpose", "src", src)
    vector = src.dyn.index if src.dyn is not None and src.dyn.kind == "vector" else None
    _rules(ctx, "dma_transpose", {"dst": dst, "src": src, "src_offset": vector}, {
        "priority": priority, "dge_mode": _enum(dge_mode if dge_mode is not None else "unknown", _DGE, "dge_mode"),
        "src_shape": tuple(src.shape), "src_indirect": src.dyn is not None, "oob_skip": skip})  # fmt: skip
    if src.ndim not in _DMA_TRANSPOSE_AXES:
        raise NkiError(f"dma_transpose: the source must be 2-D, 3-D or 4-D, got shape {src.shape}")
    canonical = _DMA_TRANSPOSE_AXES[src.ndim]
    perm = tuple(int(a) for a in axes) if axes is not None else canonical
    if perm != canonical:
        raise NkiError(
            f"dma_transpose: axes {perm} are not supported for a rank-{src.ndim} source",
            "the supported permutations are (1, 0), (2, 1, 0) and (3, 1, 2, 0)",
        )
    expected = tuple(src.shape[a] for a in perm)
    if dst.shape != expected:
        raise NkiError(f"dma_transpose: dst shape {dst.shape} must equal the permuted source shape {expected}")
    # Every supported permutation swaps the outermost and innermost dims and keeps the middle ones, which is what
    # penguin.dma_transpose means for operands of any rank; no axes attribute is needed.
    _record(ctx, "dma_transpose", {"dst": dst, "src": src}, {"oob_skip": skip or None})


# The NKI permutations by source rank (dst axis i = src axis axes[i]).
_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@nki_op
def tensor_copy(ctx: Any, dst: NkiTensor, src: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """On-chip copy with a dtype cast."""
    _mask(kw)
    dst, src = _tensor("tensor_copy", "dst", dst), _tensor("tensor_copy", "src", src)
    _elementwise("tensor_copy", {"dst": dst, "src": src})
    eng = _enum(engine, _ENGINE, "engine")
    _record(ctx, "tensor_copy", {"dst": dst, "src": src}, {"engine": eng}, eng)


def _elementwise(op: str, tensors: dict[str, NkiTensor]) -> None:
    for role, t in tensors.items():
        _on_chip(op, role, t)
    _partitions_agree(op, tensors)  # type: ignore[arg-type]
    (dst_role, dst), *rest = tensors.items()
    for role, t in rest:
        _free_agree(op, dst_role, dst, role, t)


# -- matmul / transpose -------------------------------------------------------------------------------------
@nki_op
def nc_matmul(
    ctx: Any,
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = None,
    **kw: Any,
) -> None:
    """``dst[M, N] (+)= stationary[K, M]ᵀ · moving[K, N]`` on the PE array (see ``_matmul_mode`` for the options)."""
    _mask(kw)
    op = "nc_matmul"
    dst, st, mv = _tensor(op, "dst", dst), _tensor(op, "stationary", stationary), _tensor(op, "moving", moving)
    t = _target(ctx)
    double_row = _perf_mode(op, perf_mode)
    tiles = _pe_tiles(op, tile_position, tile_size, t)
    attrs: dict[str, Any] = {"accumulate": None if accumulate is None else bool(accumulate)}
    # gen2 has no transpose mode: is_transpose only labels the instruction for the profiler there (a plain matmul).
    attrs["is_transpose"] = bool(is_transpose) and t.nc_version >= 3 or None
    attrs["double_row"] = double_row or None
    attrs["is_stationary_onezero"] = bool(is_stationary_onezero) or None
    attrs["is_moving_onezero"] = bool(is_moving_onezero) or None
    if tiles is not None:
        attrs.update(zip(("tile_row", "tile_col", "tile_rows", "tile_cols"), tiles))
    operands = {"dst": dst, "stationary": st, "moving": mv}
    # memories, K/M/N limits, tiling and double_row's rules (target/rules/pe.py)
    _rules(ctx, "matmul", operands, {**attrs, "tile_position": tile_position, "tile_size": tile_size,
                                     "shapes": {"stationary": tuple(st.shape), "moving": tuple(mv.shape)}})
    m, n = st.free_size // (2 if double_row else 1), mv.free_size // (2 if double_row else 1)
    if dst.partitions != m or dst.free_size != n:
        raise NkiError(f"{op}: dst shape {dst.shape} does not match the [M={m}, N={n}] result")
    _record(ctx, "matmul", operands, attrs)


def _perf_mode(op: str, perf_mode: Any) -> bool:
    """Whether ``perf_mode`` asks for FP8 double-row mode (gen3+; its generation, dtype and ``[K, 2, ...]`` shape are
    rules: ``target/rules/pe.py``): the contraction runs over K and that dim of 2."""
    name = perf_mode.name if isinstance(perf_mode, matmul_perf_mode) else perf_mode
    if name in (None, "none"):
        return False
    if name not in ("double_row", "double_row_gen3"):  # the second spelling is NKI 0.1's
        raise NkiError(f"{op}: perf_mode must be matmul_perf_mode.none or matmul_perf_mode.double_row, "
                       f"got {perf_mode!r}")  # fmt: skip
    return True


def _pe_tiles(op: str, tile_position: Any, tile_size: Any, t: Target) -> tuple[int, int, int, int] | None:
    """(start_row, start_column, row_size, column_size) of a matmul in PE tiling mode, None for the full array.

    Sizes are 64 or 128 (and 32 from gen3), positions multiples of their size inside the array. The API reference's
    parameter list says start_column must be 0, but its tiling section and nki-library's kernels tile columns too:
    nkic follows the latter. Tiling places the matmul on the array; the result is the same (see the MATMUL cost).
    """
    if not tile_position or not tile_size:
        return None  # one without the other: a rule (target/rules/pe.py)
    row, col = _static_pair(op, tile_position, "tile_position")
    rows, cols = _static_pair(op, tile_size, "tile_size")
    legal = (32, 64, 128) if t.nc_version >= 3 else (64, 128)
    if rows not in legal or cols not in legal:
        raise NkiError(f"{op}: tile_size sizes must be in {legal} on {t.name}, got {(rows, cols)}")
    return row, col, rows, cols  # the positions' rules: target/rules/pe.py


# -- MX (microscaling) -----------------------------------------------------------------------------------------


def _dtype_in(op: str, role: str, t: NkiTensor, *allowed: str) -> None:
    if str(t.dtype) not in allowed:
        raise NkiError(f"{op}: '{role}' must be {' or '.join(allowed)}, got {t.dtype}")


def _dims_rule(op: str, name: str, operands: dict[str, NkiTensor]) -> None:
    problem = dims_problem(INSTRUCTIONS[name], {r: (t.partitions, t.free_size) for r, t in operands.items()})
    if problem is not None:
        raise NkiError(f"{op}: {problem}")


@nki_op
def quantize_mx(ctx: Any, dst: NkiTensor, src: NkiTensor, dst_scale: NkiTensor, **kw: Any) -> None:
    """MXFP8 quantization on VectorE: for each group of 8 partitions x 4 values of ``src`` one float8_e8m0fnu
    scale in ``dst_scale`` and 4 packed fp8 values per ``dst`` element (see the QUANTIZE_MX executor)."""
    _mask(kw)
    op = "quantize_mx"
    dst, src, scale = _tensor(op, "dst", dst), _tensor(op, "src", src), _tensor(op, "dst_scale", dst_scale)
    operands = {"dst": dst, "src": src, "dst_scale": scale}
    _rules(ctx, op, operands, {})  # memories, dtypes, sizes (target/rules/pe.py)
    _dims_rule(op, op, operands)
    _record(ctx, op, operands, {}, "vector")


def _static_pair(op: str, value: Any, name: str) -> tuple[int, int]:
    try:
        a, b = value
        return int(a), int(b)  # an affine expression needs its value: the loop unrolls
    except (TypeError, ValueError):
        raise NkiError(f"{op}: {name} must be a pair of integers, got {value!r}") from None


@nki_op
def nc_matmul_mx(
    ctx: Any,
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    stationary_scale: NkiTensor,
    moving_scale: NkiTensor,
    tile_position: Any = None,
    tile_size: Any = None,
    accumulate: bool | None = None,
    **kw: Any,
) -> None:
    """``dst[M, N] (+)=`` the MX matmul of packed ``stationary[K, M]`` and ``moving[K, N]`` on the PE array: the
    contraction runs over K and the 4 values of each packed element, each value times its group's scale."""
    _mask(kw)
    op = "nc_matmul_mx"
    names = ("dst", "stationary", "moving", "stationary_scale", "moving_scale")
    operands = {r: _tensor(op, r, t) for r, t in zip(names, (dst, stationary, moving, stationary_scale, moving_scale))}
    pos = _static_pair(op, tile_position, "tile_position") if tile_position else None
    size = _static_pair(op, tile_size, "tile_size") if tile_size else None
    # memories, dtypes, sizes and row tiling (target/rules/pe.py); then the scales' layout (the declaration's)
    _rules(ctx, "matmul_mx", operands, {"tile_position": pos, "tile_size": size})
    _dims_rule(op, "matmul_mx", operands)
    attrs = {"accumulate": None if accumulate is None else bool(accumulate)}
    _record(ctx, "matmul_mx", operands, attrs)


@nki_op
def nc_transpose(ctx: Any, dst: NkiTensor, data: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """``dst[F, P] = data[P, F]`` (TensorE up to 128×128 SBUF→PSUM, VectorE up to 32×32)."""
    _mask(kw)
    op = "nc_transpose"
    dst, data = _tensor(op, "dst", dst), _tensor(op, "data", data)
    _on_chip(op, "dst", dst)
    _on_chip(op, "data", data)
    eng = _enum(engine, _ENGINE, "engine")
    _rules(ctx, "transpose", {"dst": dst, "data": data}, {"engine": eng})
    limit = 32 if eng == "vector" else 128
    if data.partitions > limit or data.free_size > limit:
        raise NkiError(f"{op}: data shape {data.shape} exceeds the {limit}x{limit} transpose limit of {eng}")
    if dst.partitions != data.free_size or dst.free_size != data.partitions:
        raise NkiError(f"{op}: dst shape {dst.shape} must be the transpose of data shape {data.shape}")
    _record(ctx, "transpose", {"dst": dst, "data": data}, {"engine": eng}, eng)


# -- element-wise arithmetic --------------------------------------------------------------------------------
@nki_op
def tensor_tensor(
    ctx: Any, dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op: Any, engine: Any = None, **kw: Any
) -> None:
    """``dst = data1 op data2`` element-wise."""
    _mask(kw)
    name = "tensor_tensor"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data1", data1), ("data2", data2))}
    _rules(ctx, name, t, {})  # the documented shape rules (target/rules/vector.py); memories: the declaration's
    eng = _enum(engine, _ENGINE, "engine")
    _record(ctx, name, t, {"op": alu_op(op), "engine": eng}, eng)  # type: ignore[arg-type]


@nki_op
def tensor_scalar(
    ctx: Any,
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = None,
    **kw: Any,
) -> None:
    """``dst = (data op0 operand0) op1 operand1``; operands are immediates or (P, 1) tiles."""
    _mask(kw)
    name = "tensor_scalar"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    # op0=None is the bypass stage (a copy, or op1 alone), like op1=None; a bypass takes no operand, so operand0
    # may be None then (nki-library passes op0=None, operand0=None for a clamp that is switched off)
    first = alu_op("bypass" if op0 is None else op0, "op0")
    t0, v0 = (None, 0.0) if first == "bypass" and operand0 is None else _scalar(name, "operand0", operand0, dst)
    attrs: dict[str, Any] = {"op0": first, "operand0": v0, "reverse0": bool(reverse0)}
    t1 = v1 = None
    if op1 is None and operand1 is not None:
        _api_rules(ctx, name, {"operand1_without_op1": True})
    if op1 is not None:
        attrs["op1"] = alu_op(op1, "op1")
        t1, v1 = _scalar(name, "operand1", operand1, dst)
    attrs.update({"operand1": v1, "reverse1": bool(reverse1), "engine": _enum(engine, _ENGINE, "engine")})
    _record(ctx, name, {"dst": dst, "data": data, "operand0": t0, "operand1": t1}, attrs, attrs["engine"])


@nki_op
def scalar_tensor_tensor(
    ctx: Any,
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: NkiTensor,
    reverse0: bool = False,
    reverse1: bool = False,
    **kw: Any,
) -> None:
    """``dst = (data op0 operand0) op1 operand1``; operand0 scalar or (P, 1), operand1 a full tile."""
    _mask(kw)
    name = "scalar_tensor_tensor"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    other = _tensor(name, "operand1", operand1)
    t0, v0 = _scalar_value(name, "operand0", operand0)
    # the documented shape and memory rules (target/rules/vector.py), operand0's (P, 1) shape among them
    _rules(ctx, name, {"dst": dst, "data": data, "operand1": other, "operand0": t0}, {})
    attrs = {"op0": alu_op(op0, "op0"), "operand0": v0, "op1": alu_op(op1, "op1"), "reverse0": bool(reverse0),
             "reverse1": bool(reverse1)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "data": data, "operand0": t0, "operand1": other}, attrs)


@nki_op
def reciprocal(ctx: Any, dst: NkiTensor, data: NkiTensor, **kw: Any) -> None:
    """``dst = 1 / data`` on VectorE."""
    _mask(kw)
    t = {"dst": _tensor("reciprocal", "dst", dst), "data": _tensor("reciprocal", "data", data)}
    _elementwise("reciprocal", t)
    _record(ctx, "reciprocal", t, {})  # type: ignore[arg-type]


# -- reductions ---------------------------------------------------------------------------------------------
def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    raw = [axis] if isinstance(axis, int) or is_symbolic(axis) else list(axis)
    axes = []
    for a in raw:
        a = int(a)
        if not -ndim <= a < ndim:
            raise NkiError(f"tensor_reduce: axis {a} is out of range for a rank-{ndim} tensor")
        axes.append(a % ndim)
    if not axes:
        raise NkiError("tensor_reduce: no axis given")
    return tuple(sorted(set(axes)))


@nki_op
def tensor_reduce(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    **kw: Any,
) -> None:
    """Reduce the given trailing free axes of ``data`` (``negate`` multiplies the result by -1)."""
    _mask(kw)
    name = "tensor_reduce"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _on_chip(name, "dst", dst)
    _on_chip(name, "data", data)
    axes = _axes(axis, data.ndim)
    # the documented rules (target/rules/vector.py): partitions, free axes only, trailing ones, dst's size
    _rules(ctx, name, {"dst": dst, "data": data}, {"axes": axes, "shape": data.shape})
    attrs = {"op": alu_op(op), "axes": axes, "negate": bool(negate), "keepdims": bool(keepdims)}
    _record(ctx, name, {"dst": dst, "data": data}, attrs)


@nki_op
def tensor_scalar_reduce(
    ctx: Any,
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: NkiTensor | None = None,
    reverse0: bool = False,
    reduce_cmd: Any = None,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    **kw: Any,
) -> None:
    """``dst = data op0 operand0`` and a row reduction of the result into ``reduce_res``."""
    _mask(kw)
    name = "tensor_scalar_reduce"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    cmd = _enum(reduce_cmd if reduce_cmd is not None else "reset_reduce", _REDUCE_CMD, "reduce_cmd")
    res = _tensor(name, "reduce_res", reduce_res)
    # the documented rules first: reduce_init with its reduce_cmd, reduce_res's memory and (P, 1) shape
    facts = {"reduce_cmd": cmd, "reduce_init_given": reduce_init is not None}
    _rules(ctx, name, {"data": data, "reduce_res": res}, facts)
    if cmd != "reset_reduce":
        raise NkiError(f"{name}: reduce_cmd={cmd} is not implemented in nkic (only reset_reduce)",
                       "reset the accumulator per call, or accumulate the per-call results with nisa.tensor_tensor")
    t0, v0 = _scalar(name, "operand0", operand0, dst)
    attrs = {"op0": alu_op(op0, "op0"), "operand0": v0, "reduce_op": alu_op(reduce_op, "reduce_op"),
             "reverse0": bool(reverse0), "reduce_res_negate": bool(reduce_res_negate)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "data": data, "operand0": t0, "reduce_res": res}, attrs)


# -- activation ---------------------------------------------------------------------------------------------
@nki_op
def activation(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    **kw: Any,
) -> None:
    """``dst = op(data · scale + bias)`` on ScalarE, optionally row-reducing into ``reduce_res``."""
    _mask(kw)
    _activation(ctx, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd or "idle")


@nki_op
def activation_reduce(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    reduce_op: Any,
    reduce_res: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    **kw: Any,
) -> None:
    """``activation`` with ``reduce_cmd=reset_reduce`` and the row reduction written to ``reduce_res``."""
    _mask(kw)
    _activation(ctx, dst, op, data, bias, scale, reduce_op, reduce_res, "reset_reduce")


def _activation(
    ctx: Any, dst: Any, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any, reduce_res: Any, cmd: Any
) -> None:
    name = "activation"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    attrs: dict[str, Any] = {"func": act_func(op)}
    tb = ts = tr = None
    if bias is not None:
        tb, attrs["bias"] = _scalar(name, "bias", bias, dst)
    ts, attrs["scale"] = _scalar(name, "scale", scale, dst)
    if reduce_res is not None:
        tr, _ = _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
        if reduce_op is None:
            raise NkiError(f"{name}: reduce_res needs a reduce_op", "pass reduce_op=nl.add")
    attrs["reduce_op"] = alu_op(reduce_op, "reduce_op") if reduce_op is not None else None
    attrs["reduce_cmd"] = _enum(cmd, _REDUCE_CMD, "reduce_cmd")
    _record(ctx, name, {"dst": dst, "data": data, "bias": tb, "scale": ts, "reduce_res": tr}, attrs)


@nki_op
def activate2(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    imm0: Any,
    imm1: Any,
    op0: Any,
    op1: Any,
    relu_param: Any = 0.0,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    **kw: Any,
) -> None:
    """``dst = op((data op0 imm0) op1 imm1, relu_param)`` on ScalarE (gen4+), optionally reducing the activated
    values with ``reduce_op`` into the ScalarE registers per ``reduce_cmd`` (``reduce_res`` receives them).

    ``imm0``/``imm1`` of a bypassed stage are ignored (not recorded). The reduction reads the fp32 activation
    results before their cast to dst's dtype, as ``activation`` does."""
    _mask(kw)
    name = "activate2"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    attrs: dict[str, Any] = {"func": act_func(op), "op0": alu_op(op0, "op0"), "op1": alu_op(op1, "op1"),
                             "reverse0": bool(reverse0), "reverse1": bool(reverse1),
                             "reduce_op": alu_op(reduce_op, "reduce_op") if reduce_op is not None else None,
                             "reduce_cmd": _enum(reduce_cmd if reduce_cmd is not None else "idle", _REDUCE_CMD,
                                                 "reduce_cmd")}  # fmt: skip
    _api_rules(ctx, name, attrs)  # the documented (op0, op1) and reverse rules, citing their sentences
    problem = activate2_problem(attrs.get)
    if problem is not None:
        raise NkiError(problem)
    tiles: dict[str, NkiTensor | None] = {"dst": dst, "data": data}
    for k, value in ((0, imm0), (1, imm1)):
        tile, number = _scalar(name, f"imm{k}", value, dst) if attrs[f"op{k}"] != "bypass" else (None, None)
        tiles[f"imm{k}"], attrs[f"imm{k}"] = tile, number
    tiles["relu_param"], relu = _scalar(name, "relu_param", relu_param, dst)
    attrs["relu_param"] = relu if relu else None
    tiles["reduce_res"] = None
    if reduce_res is not None:
        tiles["reduce_res"], _ = _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
    _record(ctx, name, tiles, attrs, "scalar")


# -- fills and predicates -----------------------------------------------------------------------------------
@nki_op
def memset(ctx: Any, dst: NkiTensor, value: Any, engine: Any = None, **kw: Any) -> None:
    """Fill ``dst`` with ``value``."""
    _mask(kw)
    dst = _tensor("memset", "dst", dst)
    _on_chip("memset", "dst", dst)
    if not isinstance(value, (int, float)):
        raise NkiError(f"memset: value must be a number, got {type(value).__name__}")
    is_float = dst.dtype.startswith(("float", "bfloat", "tfloat"))
    if not is_float and float(value) != int(value):
        raise NkiError(f"memset: value {value} does not fit the integer dtype {dst.dtype}")
    eng = _enum(engine, _ENGINE, "engine")
    _record(ctx, "memset", {"dst": dst}, {"value": float(value) if is_float else int(value), "engine": eng}, eng)


def _pattern(op: str, pattern: Any) -> tuple[tuple[int, int], ...]:
    try:
        pairs = tuple((int(s), int(n)) for s, n in pattern)
    except (TypeError, ValueError):
        raise NkiError(f"{op}: pattern must be a list of [step, num] pairs, got {pattern!r}") from None
    if not pairs or any(n <= 0 for _, n in pairs):  # at most 4 pairs: target/rules/vector.py
        raise NkiError(f"{op}: pattern {[list(p) for p in pairs]} needs pairs with positive sizes")
    return pairs


@nki_op
def iota(ctx: Any, dst: NkiTensor, pattern: Any, offset: Any = 0, channel_multiplier: Any = 0, **kw: Any) -> None:
    """``dst[p, i…] = offset + p·channel_multiplier + Σ step·i``."""
    _mask(kw)
    dst = _tensor("iota", "dst", dst)
    _rules(ctx, "iota", {"dst": dst}, {})  # dst in SBUF, its size (target/rules/vector.py)
    pairs = _pattern("iota", pattern)
    attrs = {"pattern": pairs, "offset": int(offset), "channel_multiplier": int(channel_multiplier)}
    _record(ctx, "iota", {"dst": dst}, attrs)


@nki_op
def affine_select(
    ctx: Any,
    dst: NkiTensor,
    pattern: Any,
    channel_multiplier: Any,
    on_true_tile: NkiTensor,
    on_false_value: Any,
    cmp_op: Any = "equal",
    offset: Any = 0,
    **kw: Any,
) -> None:
    """``dst = on_true if cmp_op(offset + p·channel_multiplier + Σ step·i, 0) else on_false_value``."""
    _mask(kw)
    name = "affine_select"
    dst, on_true = _tensor(name, "dst", dst), _tensor(name, "on_true_tile", on_true_tile)
    for role, t in (("dst", dst), ("on_true_tile", on_true)):
        if str(t.buffer) == "psum":  # the common mistake (matmul scores): its own message, with the fix
            _in_sbuf_not_psum(name, role, t)
    _rules(ctx, name, {"dst": dst, "on_true": on_true}, {})  # SBUF tiles, sizes (target/rules/vector.py)
    _elementwise(name, {"dst": dst, "on_true_tile": on_true})
    pairs = _pattern(name, pattern)
    attrs = {"pattern": pairs, "channel_multiplier": int(channel_multiplier), "cmp_op": alu_op(cmp_op, "cmp_op"),
             "on_false_value": float(on_false_value), "offset": int(offset)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "on_true": on_true}, attrs)


@nki_op
def range_select(
    ctx: Any,
    dst: NkiTensor,
    on_true_tile: NkiTensor,
    comp_op0: Any,
    comp_op1: Any,
    bound0: NkiTensor,
    bound1: NkiTensor,
    reduce_cmd: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_op: Any = None,
    range_start: Any = 0,
    on_false_value: Any = -3.4028234663852886e38,
    **kw: Any,
) -> None:
    """``dst = on_true_tile`` where both ``comp_op(range_start + free index, bound)`` hold, else
    ``on_false_value``; the row reduction with ``reduce_op`` (maximum) accumulates per ``reduce_cmd``."""
    _mask(kw)
    name = "range_select"
    dst, on_true = _tensor(name, "dst", dst), _tensor(name, "on_true_tile", on_true_tile)
    _elementwise(name, {"dst": dst, "on_true_tile": on_true})
    ops = {k: alu_op(v, k) for k, v in (("comp_op0", comp_op0), ("comp_op1", comp_op1))}
    bounds = {k: _tensor(name, k, v) for k, v in (("bound0", bound0), ("bound1", bound1))}
    _rules(ctx, name, {"on_true": on_true, **bounds}, {})  # bounds: (P, 1) tiles on on_true's partitions
    if reduce_res is not None:
        _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
    reduce = alu_op(reduce_op if reduce_op is not None else "maximum", "reduce_op")
    attrs = {**ops, "on_false_value": float(on_false_value), "range_start": int(range_start), "reduce_op": reduce,
             "reduce_cmd": _enum(reduce_cmd if reduce_cmd is not None else "reset_reduce", _REDUCE_CMD, "reduce_cmd")}
    operands = {"dst": dst, "on_true": on_true, **bounds, "reduce_res": reduce_res}
    _record(ctx, name, operands, attrs, "vector")  # type: ignore[arg-type]


@nki_op
def tensor_tensor_scan(
    ctx: Any,
    dst: NkiTensor,
    data0: NkiTensor,
    data1: NkiTensor,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    **kw: Any,
) -> None:
    """``dst[:, i] = op1(op0(data0[:, i], dst[:, i-1]), data1[:, i])`` along the free dim, ``initial`` before the
    first element (a number or a (P, 1) tile); fp32 math on VectorE."""
    _mask(kw)
    name = "tensor_tensor_scan"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data0", data0), ("data1", data1))}
    _rules(ctx, name, t, {})
    _elementwise(name, t)
    t_init, v_init = _scalar(name, "initial", initial, t["dst"])
    attrs = {"op0": alu_op(op0, "op0"), "op1": alu_op(op1, "op1"), "initial": v_init, "reverse0": bool(reverse0),
             "reverse1": bool(reverse1)}  # fmt: skip
    _record(ctx, name, {**t, "initial": t_init}, attrs, "vector")


@nki_op
def tensor_copy_predicated(
    ctx: Any, dst: NkiTensor, src: Any, predicate: NkiTensor, reverse_pred: bool = False, **kw: Any
) -> None:
    """``dst = src`` where ``predicate`` is non-zero (zero with ``reverse_pred``); elsewhere dst is unchanged."""
    _mask(kw)
    name = "tensor_copy_predicated"
    dst, pred = _tensor(name, "dst", dst), _tensor(name, "predicate", predicate)
    tensors = {"dst": dst, "predicate": pred}
    value = None
    if isinstance(src, NkiTensor):
        tensors["src"] = src
        if src.buffer == "psum" and pred.buffer == "psum":
            raise NkiError(f"{name}: src and predicate cannot both be in PSUM")
    elif isinstance(src, (int, float)) and not isinstance(src, bool):
        value = float(src)
    else:
        raise NkiError(f"{name}: src must be a tile or a number, got {type(src).__name__}")
    _rules(ctx, name, tensors, {})  # the shapes, predicate's and src's dtypes (target/rules/vector.py)
    operands = {"dst": dst, "src": tensors.get("src"), "predicate": pred}
    _record(ctx, name, operands, {"src": value, "reverse_pred": bool(reverse_pred)}, "vector")


@nki_op
def bn_stats(ctx: Any, dst: NkiTensor, data: NkiTensor, **kw: Any) -> None:
    """Per partition: ``(count, mean, variance * count)`` of the even elements of ``data``, then of the odd ones."""
    _mask(kw)
    dst, data = _tensor("bn_stats", "dst", dst), _tensor("bn_stats", "data", data)
    _on_chip("bn_stats", "dst", dst)
    _on_chip("bn_stats", "data", data)
    _partitions_agree("bn_stats", {"dst": dst, "data": data})
    _record(ctx, "bn_stats", {"dst": dst, "data": data}, {})


@nki_op
def bn_aggr(ctx: Any, dst: NkiTensor, data: NkiTensor, **kw: Any) -> None:
    """Mean and variance per partition from one or more ``bn_stats`` outputs laid side by side in ``data``."""
    _mask(kw)
    dst, data = _tensor("bn_aggr", "dst", dst), _tensor("bn_aggr", "data", data)
    _on_chip("bn_aggr", "dst", dst)
    _on_chip("bn_aggr", "data", data)
    _partitions_agree("bn_aggr", {"dst": dst, "data": data})
    _record(ctx, "bn_aggr", {"dst": dst, "data": data}, {})


@nki_op
def exponential(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    max_value: Any = 0.0,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    reduce_init: Any = 0.0,
    **kw: Any,
) -> None:
    """``dst = exp(src - max_value)`` on VectorE (gen4+); the row sums accumulate in its registers per
    ``reduce_cmd`` and ``reduce_res`` receives them."""
    _mask(kw)
    name = "exponential"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _elementwise(name, {"dst": dst, "src": src})
    t_max, v_max = _scalar(name, "max_value", max_value, dst)
    cmd = _enum(reduce_cmd if reduce_cmd is not None else "idle", _REDUCE_CMD, "reduce_cmd")
    t_init, v_init = _scalar(name, "reduce_init", reduce_init, dst)
    _api_rules(ctx, name, {"ranks": {"src": src.ndim, "dst": dst.ndim}})
    t_res = None
    if reduce_res is not None:
        t_res, _ = _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
    attrs = {"max_value": v_max if v_max else None, "reduce_cmd": cmd, "reduce_init": v_init if v_init else None}
    operands = {"dst": dst, "src": src, "max_value": t_max, "reduce_res": t_res, "reduce_init": t_init}
    _record(ctx, name, operands, attrs, "vector")


@nki_op
def select_reduce(
    ctx: Any,
    dst: NkiTensor,
    predicate: NkiTensor,
    on_true: NkiTensor,
    on_false: Any,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    **kw: Any,
) -> None:
    """``dst = on_true`` where ``predicate`` holds, else ``on_false`` (a number or a (P, 1) tile), max-reduced into
    the VectorE registers per ``reduce_cmd``."""
    _mask(kw)
    name = "select_reduce"
    t = {r: _tensor(name, r, v) for r, v in (("dst", dst), ("predicate", predicate), ("on_true", on_true))}
    _rules(ctx, name, t, {})  # the documented shapes (target/rules/vector.py); memories: the declaration's
    if t["on_true"].buffer == "psum" and t["predicate"].buffer == "psum":
        raise NkiError(f"{name}: on_true and predicate cannot both be in PSUM")
    if t["predicate"].dtype not in ("int8", "uint8", "int16", "uint16"):
        raise NkiError(f"{name}: predicate must be int8, uint8, int16 or uint16, got {t['predicate'].dtype}")
    reduce = alu_op(reduce_op if reduce_op is not None else "maximum", "reduce_op")
    t_false, v_false = _scalar(name, "on_false", on_false, t["dst"])
    t_res = None if reduce_res is None else _tensor(name, "reduce_res", reduce_res)  # its shape: a rule
    attrs = {"on_false": v_false, "reduce_cmd": _enum(reduce_cmd if reduce_cmd is not None else "idle", _REDUCE_CMD,
             "reduce_cmd"), "reduce_op": reduce, "reverse_pred": bool(reverse_pred)}  # fmt: skip
    _record(ctx, name, {**t, "on_false": t_false, "reduce_res": t_res}, attrs, "vector")


@nki_op
def tensor_scalar_cumulative(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = None,
    **kw: Any,
) -> None:
    """A running ``op1`` over ``op0(src, imm0)`` along the free dim, ``dst[i]`` the running value; the register
    starts at op1's identity (``reset_reduce``), at ``imm1`` (``load_reduce``) or where it was (``reduce``)."""
    _mask(kw)
    name = "tensor_scalar_cumulative"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _elementwise(name, {"dst": dst, "src": src})
    ops = {"op0": alu_op(op0, "op0"), "op1": alu_op(op1, "op1")}
    cmd = _enum(reduce_cmd if reduce_cmd is not None else "reset_reduce", _REDUCE_CMD, "reduce_cmd")
    t0, v0 = _scalar(name, "imm0", imm0, dst)
    t1 = v1 = None
    if cmd == "load_reduce":
        if imm1 is None:
            raise NkiError(f"{name}: reduce_cmd=load_reduce needs imm1, the starting value")
        t1, v1 = _scalar(name, "imm1", imm1, dst)
    attrs = {**ops, "imm0": v0, "imm1": v1, "reduce_cmd": cmd}
    _record(ctx, name, {"dst": dst, "src": src, "imm0": t0, "imm1": t1}, attrs, "vector")


_PARTITION_REDUCE_OPS = ("add", "average", "maximum", "minimum", "bitwise_or", "bitwise_and")


@nki_op
def tensor_partition_reduce(ctx: Any, dst: NkiTensor, op: Any, data: NkiTensor, **kw: Any) -> None:
    """``dst[0, ...] = op``-reduction of ``data`` across its partitions, on GpSimd (no PSUM operands)."""
    _mask(kw)
    name = "tensor_partition_reduce"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _on_chip(name, "dst", dst)
    _on_chip(name, "data", data)
    reduce = alu_op(op)
    if reduce not in _PARTITION_REDUCE_OPS:
        raise NkiError(f"{name}: op must be one of {', '.join(_PARTITION_REDUCE_OPS)}, got {reduce}")
    _record(ctx, name, {"dst": dst, "data": data}, {"op": reduce}, "gpsimd")


# -- registers (frontend/control.py has the loops that use them) ----------------------------------------------
@nki_op
def register_alloc(ctx: Any, x: Any = None) -> VirtualRegister:
    """A fresh register, set to ``x`` when it is an int (or a register: a copy), or loaded from ``x`` when it is a
    one-element tensor: nki-library's ``all_expert_mx_impl`` writes ``nisa.register_alloc(decision_sb[0, 0])``,
    the ``register_alloc`` + ``register_load`` pair of NKI's ``VirtualRegister`` example in one call."""
    reg = control.new_register(ctx)
    if isinstance(x, NkiTensor):
        t = control.check_scalar_tensor("register_alloc", "x", x)
        _record(ctx, "register_load", {"src": t}, {"dst_reg": reg.number})
    elif x is not None:
        control.set_register(ctx, reg, x, "register_alloc")
    return reg


@nki_op
def register_move(ctx: Any, dst: Any, src: Any) -> None:
    """``dst = src``, an int constant or another register."""
    control.set_register(ctx, _register("register_move", "dst", dst), src)


@nki_op
def register_load(ctx: Any, dst: Any, src: Any) -> None:
    """``dst`` = the one element of ``src`` (SBUF or HBM), read as a 32-bit integer."""
    reg = _register("register_load", "dst", dst)
    t = control.check_scalar_tensor("register_load", "src", src)
    _record(ctx, "register_load", {"src": t}, {"dst_reg": reg.number})


@nki_op
def register_store(ctx: Any, dst: Any, src: Any) -> None:
    """The one element of ``dst`` (SBUF or HBM) = the register ``src``, converted to dst's dtype."""
    reg = _register("register_store", "src", src)
    t = control.check_scalar_tensor("register_store", "dst", dst)
    _record(ctx, "register_store", {"dst": t}, {"src_reg": reg.number})


def _register(op: str, role: str, value: Any) -> VirtualRegister:
    if not isinstance(value, VirtualRegister):
        raise NkiError(f"{op}: '{role}' must be a VirtualRegister (nisa.register_alloc), got {type(value).__name__}")
    return value
# -- random numbers (XORWOW inside VectorE / GpSimd: runtime/rng.py) -----------------------------------------
_RNG_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
_RAND2_DTYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", *_RNG_DTYPES)


def _rng_engine(ctx: Any, op: str, engine: Any, default: str) -> str:
    """The engine hint of an RNG instruction: vector or gpsimd, each from the generation its declaration names."""
    eng = _enum(engine, _ENGINE, "engine")
    eng = default if eng == "unknown" else eng
    spec, name = INSTRUCTIONS[op], ENGINE_OF_HINT.get(eng, "")
    since = max(spec.since, spec.engine_since.get(name, 0)) if name in spec.engines else None
    if since is None:
        raise NkiError(f"{op}: engine must be nisa.engine.vector or nisa.engine.gpsimd, got {eng}")
    target = _target(ctx)
    if target.nc_version < since:
        raise NkiError(f"{op}: the {eng} engine has no PRNG instruction on {target.name}", f"it needs gen{since}")
    return eng


@nki_op
def rng(ctx: Any, dst: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """``dst`` = 32 random bits per element from the engine's XORWOW generators, truncated to the dtype's low bits."""
    _mask(kw)
    name = "rng"
    dst = _tensor(name, "dst", dst)
    _on_chip(name, "dst", dst)
    if dst.dtype not in _RNG_DTYPES:
        raise NkiError(f"{name}: dst must be an integer tile ({', '.join(_RNG_DTYPES)}), got {dst.dtype}")
    eng = _rng_engine(ctx, name, engine if engine is not None else "vector", "vector")
    _record(ctx, name, {"dst": dst}, {"engine": eng}, eng)


@nki_op
def rand2(ctx: Any, dst: NkiTensor, min: Any, max: Any, **kw: Any) -> None:  # noqa: A002 (NKI's names)
    """``dst`` uniform in [min, max] (fp32 ``min + u * (max - min)``, u in [0, 1) from VectorE's XORWOW), cast."""
    _mask(kw)
    name = "rand2"
    dst = _tensor(name, "dst", dst)
    _on_chip(name, "dst", dst)
    if dst.dtype not in _RAND2_DTYPES:
        raise NkiError(f"{name}: dst cannot be {dst.dtype} (one of {', '.join(_RAND2_DTYPES)})")
    t_min, v_min = _scalar(name, "min", min, dst)
    t_max, v_max = _scalar(name, "max", max, dst)
    if v_min is not None and v_max is not None and not is_symbolic(min) and not is_symbolic(max) and v_min >= v_max:
        raise NkiError(f"{name}: min must be less than max, got min={v_min}, max={v_max}")
    _record(ctx, name, {"dst": dst, "min": t_min, "max": t_max}, {"min": v_min, "max": v_max}, "vector")


@nki_op
def dropout(ctx: Any, dst: NkiTensor, data: NkiTensor, prob: Any, **kw: Any) -> None:
    """``dst = data`` with each element replaced by 0 with probability ``prob`` (a number or a (P, 1) tile); no
    rescaling of the kept elements (the docs name none)."""
    _mask(kw)
    name = "dropout"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    t_prob, v_prob = _scalar(name, "prob", prob, dst)
    if t_prob is None and not is_symbolic(prob) and not 0.0 <= float(prob) <= 1.0:
        raise NkiError(f"{name}: prob is a probability in [0, 1], got {prob}")
    _record(ctx, name, {"dst": dst, "data": data, "prob": t_prob}, {"prob": v_prob}, "vector")


@nki_op
def set_rng_seed(ctx: Any, src_seeds: NkiTensor, **kw: Any) -> None:
    """Seed VectorE's PRNG from the 32-bit value ``src_seeds[0, 0]`` (its bits: an int32 42 is seed 42)."""
    _mask(kw)
    name = "set_rng_seed"
    src = _tensor(name, "src_seeds", src_seeds)  # SBUF or PSUM, [1, 1], 32 bits: rules (target/rules/scalar.py)
    _record(ctx, name, {"src_seeds": src}, {}, "vector")


@nki_op
def rand_set_state(ctx: Any, src_seeds: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """The engine's PRNG state of lane p = ``src_seeds[p, :]`` (uint32; 6 words on GpSimd, 24 on VectorE)."""
    _mask(kw)
    name = "rand_set_state"
    src = _tensor(name, "src_seeds", src_seeds)
    _rules(ctx, name, {"src_seeds": src}, {})  # in SBUF, uint32, 6 or 24 words (target/rules/scalar.py)
    eng = _rng_engine(ctx, name, engine, "gpsimd")
    _api_rules(ctx, name, {"ranks": {"src_seeds": src.ndim}})
    _record(ctx, name, {"src_seeds": src}, {"engine": eng}, eng)


@nki_op
def rand_get_state(ctx: Any, dst: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """``dst[p, :]`` = the engine's PRNG state of lane p (uint32; 6 words on GpSimd, 24 on VectorE)."""
    _mask(kw)
    name = "rand_get_state"
    dst = _tensor(name, "dst", dst)
    _on_chip(name, "dst", dst)
    eng = _rng_engine(ctx, name, engine, "gpsimd")
    _api_rules(ctx, name, {"ranks": {"dst": dst.ndim}})
    _record(ctx, name, {"dst": dst}, {"engine": eng}, eng)
# -- the top-k family ---------------------------------------------------------------------------------------
_INDEX_DTYPES = ("uint16", "uint32")


def _rank_at_most(op: str, role: str, t: NkiTensor, ndim: int) -> None:
    if t.ndim > ndim:
        raise NkiError(f"{op}: '{role}' can be at most {ndim}-dimensional, got shape {t.shape}")


def _eight_per_partition(op: str, role: str, t: NkiTensor, data: NkiTensor) -> None:
    """Eight elements on each of ``data``'s partitions (a ``[par_dim, 8]`` tile or a view of that size)."""
    if t.partitions != data.partitions or t.free_size != 8:
        raise NkiError(f"{op}: '{role}' must hold 8 elements on each of {data.partitions} partitions, got {t.shape}")


def _int_param(op: str, name: str, value: Any) -> int:
    """A compile-time int32 parameter (a symbolic loop index unrolls the loop)."""
    if isinstance(value, bool) or not (isinstance(value, int) or is_symbolic(value)):
        raise NkiError(f"{op}: {name} must be an int32 number, got {type(value).__name__}")
    v = int(value)
    if not -(1 << 31) <= v < (1 << 31):
        raise NkiError(f"{op}: {name} = {v} does not fit in int32")
    return v


@nki_op
def max8(ctx: Any, dst: NkiTensor, src: NkiTensor, **kw: Any) -> None:
    """``dst[p, :]`` = the 8 largest values of ``src[p]`` (8..16384 elements, up to 3-D) in descending order, on
    VectorE: compared in fp32, converted to ``dst.dtype``; equal values each take a slot."""
    _mask(kw)
    name = "max8"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _on_chip(name, "dst", dst)
    _on_chip(name, "src", src)
    # the ranks, dst's (src partitions, 8) and src's 8..16384 elements (target/rules/vector.py)
    _rules(ctx, name, {"dst": dst, "src": src}, {"shapes": {"src": src.shape, "dst": dst.shape}})
    _record(ctx, name, {"dst": dst, "src": src}, {}, "vector")


@nki_op
def nc_find_index8(ctx: Any, dst: NkiTensor, data: NkiTensor, vals: NkiTensor, **kw: Any) -> None:
    """``dst[p, i]`` = the free index (flattened, from 0) of ``vals[p, i]`` in ``data[p]`` on VectorE; the k-th
    duplicate of a value in ``vals`` takes its k-th match, and a value not found reads all-ones (``0xFFFF`` /
    ``0xFFFFFFFF``). Compared in fp32; ``dst`` is uint16 or uint32."""
    _mask(kw)
    name = "nc_find_index8"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data", data), ("vals", vals))}
    for role, x in t.items():
        _on_chip(name, role, x)
    # the ranks, vals' 8 per partition, data's 8..16384 (target/rules/vector.py)
    _rules(ctx, "find_index8", t, {"shapes": {"data": t["data"].shape, "vals": t["vals"].shape}})
    if t["dst"].ndim != 2:
        raise NkiError(f"{name}: dst must be a 2-D [{t['data'].partitions}, 8] tile, got shape {t['dst'].shape}")
    _eight_per_partition(name, "dst", t["dst"], t["data"])
    _dtype_in(name, "dst", t["dst"], *_INDEX_DTYPES)
    _record(ctx, "find_index8", t, {}, "vector")


@nki_op
def nc_match_replace8(
    ctx: Any, dst: NkiTensor, data: NkiTensor, vals: NkiTensor, imm: Any, dst_idx: NkiTensor | None = None, **kw: Any
) -> None:
    """``dst`` = ``data`` with one match of each ``vals[p, i]`` replaced by ``imm``, on VectorE. ``vals`` is taken
    in reverse order (i = 7 .. 0), each claiming the first match no later slot claimed, so duplicates pair with
    their matches in descending slot order; ``dst_idx`` (uint16/uint32, optional) receives the free indices, all-ones
    for a value not found (then nothing is replaced). ``dst`` may be ``data`` itself."""
    _mask(kw)
    name = "nc_match_replace8"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data", data), ("vals", vals))}
    _elementwise(name, {"dst": t["dst"], "data": t["data"]})
    _on_chip(name, "vals", t["vals"])
    _rank_at_most(name, "vals", t["vals"], 3)
    _eight_per_partition(name, "vals", t["vals"], t["data"])
    if dst_idx is not None:
        t["dst_idx"] = idx = _tensor(name, "dst_idx", dst_idx)
        _on_chip(name, "dst_idx", idx)
        _eight_per_partition(name, "dst_idx", idx, t["data"])
        _dtype_in(name, "dst_idx", idx, *_INDEX_DTYPES)
    if isinstance(imm, bool) or not (isinstance(imm, (int, float)) or is_symbolic(imm)):
        raise NkiError(f"{name}: imm must be a number, got {type(imm).__name__}")
    _record(ctx, "match_replace8", t, {"imm": float(imm)}, "vector")


@nki_op
def nonzero_with_count(
    ctx: Any, dst: NkiTensor, src: NkiTensor, index_offset: Any = 0, padding_val: Any = -1, **kw: Any
) -> None:
    """On partitions 0, 16, ..., 112 (the first of each GpSimd core's 16): ``dst[p]`` = the indices of the nonzero
    elements of ``src[p]`` plus ``index_offset``, then ``padding_val`` up to ``src``'s free size, then their count.
    The other partitions of ``dst`` are left untouched. GpSimd, gen3+."""
    _mask(kw)
    name = "nonzero_with_count"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _in(name, "dst", dst, "sbuf")
    _in(name, "src", src, "sbuf")
    _dtype_in(name, "src", src, "float32", "int32")
    _dtype_in(name, "dst", dst, "int32")
    _partitions_agree(name, {"dst": dst, "src": src})
    if dst.free_size != src.free_size + 1:
        raise NkiError(f"{name}: dst needs {src.free_size + 1} elements per partition (src's plus the count), "
                       f"got shape {dst.shape}")  # fmt: skip
    attrs = {"index_offset": _int_param(name, "index_offset", index_offset),
             "padding_val": _int_param(name, "padding_val", padding_val)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "src": src}, attrs, "gpsimd")


@nki_op
def topk(ctx: Any, val_dst: NkiTensor, idx_dst: NkiTensor, src: NkiTensor, n: Any, **kw: Any) -> None:
    """Per group of 16 partitions, the k largest of the ``n`` BF16 elements of its snake (element j at partition
    ``j % 16``, column ``j // 16``), k = ``val_dst``'s free size, on GpSimd: ``val_dst`` gets them in ascending order
    and ``idx_dst`` (uint32) their snake indices, both written in the same snake layout (result j at partition
    ``j % 16``, column ``j // 16``; columns from ``ceil(k / 16)`` on are not written)."""
    _mask(kw)
    name = "topk"
    t = {role: _tensor(name, role, v) for role, v in (("val_dst", val_dst), ("idx_dst", idx_dst), ("src", src))}
    _rules(ctx, name, t, {})  # SBUF tiles, partitions a multiple of 16, dtypes (target/rules/vector.py)
    for role, x in t.items():
        if x.ndim != 2:
            raise NkiError(f"{name}: '{role}' must be a 2-D tile, got shape {x.shape}")
    count, k = _int_param(name, "n", n), t["val_dst"].free_size
    if not 8 <= count < TOPK_MAX_N:
        raise NkiError(f"{name}: n must satisfy 8 <= n < {TOPK_MAX_N}, got {count}")
    if k > count:
        raise NkiError(f"{name}: k = {k} (val_dst's free size) exceeds n = {count}")
    if t["src"].free_size * GPSIMD_GROUP < count:
        raise NkiError(f"{name}: a {GPSIMD_GROUP}-partition snake of n = {count} needs src free size >= "
                       f"{-(-count // GPSIMD_GROUP)}, got {t['src'].free_size}")  # fmt: skip
    _record(ctx, name, t, {"n": count}, "gpsimd")
# -- gathers and partition shuffles -------------------------------------------------------------------------
def _start_partition(t: NkiTensor) -> int | None:
    """The first partition an on-chip view reaches, when the trace knows it (a static offset into an allocation
    that nkic places; None otherwise)."""
    if not t.on_chip or t.storage.address is not None or not isinstance(t.offset, int):
        return None
    if t.dtype != t.storage.dtype:
        return None
    row = 1
    for n in t.storage.shape[1:]:
        row *= n
    return t.offset // row


def _same_dtype(op: str, dst: NkiTensor, role: str, src: NkiTensor) -> None:
    if dst.dtype != src.dtype:
        raise NkiError(f"{op}: dst is {dst.dtype} but {role} is {src.dtype}", f"{op} moves data without a cast")


@nki_op
def local_gather(
    ctx: Any,
    dst: NkiTensor,
    src_buffer: NkiTensor,
    index: NkiTensor,
    num_elem_per_idx: Any = 1,
    num_valid_indices: Any = None,
    **kw: Any,
) -> None:
    """Per GpSimd core (16 partitions): the core's ``index`` slice flattened partition-first, its first
    ``num_valid_indices`` entries used; every partition p of the core gets ``src_buffer[p, idx : idx +
    num_elem_per_idx]`` for each index in turn (indices count elements of the flattened free dims).

    The cores are the 16-partition groups of the tiles, which must start on a core boundary. Out-of-range indices
    (undefined in NKI) are a simulation error."""
    _mask(kw)
    name = "local_gather"
    t = {r: _tensor(name, r, v) for r, v in (("dst", dst), ("src_buffer", src_buffer), ("index", index))}
    _same_dtype(name, t["dst"], "src_buffer", t["src_buffer"])
    for role, v in t.items():
        start = _start_partition(v)
        if start is not None and start % GPSIMD_CORE_PARTITIONS:
            raise NkiError(f"{name}: '{role}' starts at partition {start}, not on a GpSimd core boundary "
                           f"(a multiple of {GPSIMD_CORE_PARTITIONS})")  # fmt: skip
    per_idx = int(num_elem_per_idx)
    per_core = GPSIMD_CORE_PARTITIONS * t["index"].free_size  # the indices in one core's 16-partition slice
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    attrs = {"num_elem_per_idx": per_idx, "num_valid_indices": valid}
    _documented_rules(ctx, _target(ctx), name, t, attrs)  # the fields' rules first: dst's size follows from them
    if t["dst"].free_size != valid * per_idx:
        raise NkiError(f"{name}: dst needs {valid} x {per_idx} = {valid * per_idx} elements per partition, has "
                       f"{t['dst'].free_size}")  # fmt: skip
    _record(ctx, name, t, attrs, "gpsimd")


@nki_op
def nc_n_gather(ctx: Any, dst: NkiTensor, data: NkiTensor, indices: NkiTensor, **kw: Any) -> None:
    """``dst[p, i] = data[p, indices[p, i]]`` within each partition, data's free dims flattened (GpSimd, SBUF).
    An index outside ``[0, data.size / data.shape[0])`` is a simulation error."""
    _mask(kw)
    name = "nc_n_gather"
    t = {r: _tensor(name, r, v) for r, v in (("dst", dst), ("data", data), ("indices", indices))}
    _rules(ctx, name, t, {})  # type: ignore[arg-type]
    _record(ctx, name, t, {}, "gpsimd")


def _shuffle_mask(mask: Any) -> Any:
    """The mask with its affine entries bound (a loop index unrolls); what is wrong with it is a rule's to say."""
    try:
        return tuple(int(m) if is_symbolic(m) else m for m in mask)
    except TypeError:
        return mask  # not a list: the rule names it


@nki_op
def nc_stream_shuffle(ctx: Any, dst: NkiTensor, src: NkiTensor, shuffle_mask: Any, **kw: Any) -> None:
    """Per 32-partition quadrant q: ``dst[32q + i] = src[32q + shuffle_mask[i]]`` (whole partitions, VectorE); an
    entry of 255 leaves ``dst[32q + i]`` unmodified, and entries for partitions dst does not have are unused.
    In place (dst is src) is allowed."""
    _mask(kw)
    name = "nc_stream_shuffle"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _on_chip(name, "dst", dst)
    _on_chip(name, "src", src)
    mask = _shuffle_mask(shuffle_mask)
    starts = {r: s for r, s in (("src", _start_partition(src)), ("dst", _start_partition(dst))) if s is not None}
    # the mask's entries and the tiles' start partitions (target/rules/vector.py)
    _rules(ctx, name, {"dst": dst, "src": src}, {"shuffle_mask": mask, "starts": starts})
    for i in range(dst.partitions):
        quadrant, lane = divmod(i, SHUFFLE_QUADRANT)
        pick = mask[lane]
        if pick != SHUFFLE_KEEP and quadrant * SHUFFLE_QUADRANT + pick >= src.partitions:
            raise NkiError(f"{name}: shuffle_mask[{lane}] = {pick} makes dst partition {i} read partition "
                           f"{quadrant * SHUFFLE_QUADRANT + pick} of src, which has {src.partitions}",
                           f"use {SHUFFLE_KEEP} for partitions to leave unchanged")  # fmt: skip
    _record(ctx, name, {"dst": dst, "src": src}, {"shuffle_mask": mask}, "vector")


@nki_op
def sequence_bounds(ctx: Any, dst: NkiTensor, segment_ids: NkiTensor, **kw: Any) -> None:
    """For each element of the one-partition ``segment_ids`` (n of them), ``dst[0, 0, i]`` / ``dst[0, 1, i]`` =
    the start / end (exclusive) of the run of equal ids holding it; id 0 is padding and gets ``(n, -1)``. Runs are
    maximal stretches of equal neighbours, as in NKI's reference. Negative or non-integral ids are a simulation
    error (NKI requires non-negative integers)."""
    _mask(kw)
    name = "sequence_bounds"
    dst, seg = _tensor(name, "dst", dst), _tensor(name, "segment_ids", segment_ids)
    _rules(ctx, name, {"dst": dst, "segment_ids": seg}, {})  # one partition, float32/int32 (target/rules/vector.py)
    if dst.free_size != 2 * seg.free_size:
        raise NkiError(f"{name}: dst must be (1, 2, {seg.free_size}) for {seg.free_size} segment ids, got shape "
                       f"{dst.shape}")  # fmt: skip
    _record(ctx, name, {"dst": dst, "segment_ids": seg}, {}, "gpsimd")


@nki_op
def dma_compute(
    ctx: Any,
    dst: NkiTensor,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = None,
    **kw: Any,
) -> None:
    """``dst = reduce_op(srcs[0] * scales[0], srcs[1] * scales[1], ...)`` by a DMA engine, in fp32 with one cast
    to dst's dtype; only ``nl.add`` and scales of 1.0, as in NKI. Operands in HBM or SBUF with equal element
    counts; up to 16 sources, as in NKI. An instruction record has room for 5 (``DMA_COMPUTE_MAX_SRCS``): more are
    summed by a chain of DMA_COMPUTEs through a float32 tensor of dst's shape (the first adds 5 sources, each next
    one the running sum and 4 more, the last writes dst), the same left-to-right fp32 sum with one cast at the end.

    With a dynamic operand (``.ap(vector_offset=)``, or a scalar / register offset) it is NKI's read-modify-write:
    exactly two sources and ``unique_indices=True``; a gather RMW (``dst`` static, one source indirect, the other
    source the same view as ``dst``) or a scatter RMW (``dst`` indirect and one source the same dynamic view as
    ``dst``, the other the data). ``oob_mode=skip`` leaves out-of-bounds rows untouched, as for ``dma_copy``."""
    _mask(kw)
    name = "dma_compute"
    dst = _tensor(name, "dst", dst)
    if isinstance(srcs, NkiTensor) or not isinstance(srcs, (list, tuple)):
        raise NkiError(f"{name}: srcs must be a list of tensors, got {type(srcs).__name__}")
    if not srcs:
        raise NkiError(f"{name}: srcs is empty")
    sources = {f"src{i}": _tensor(name, f"srcs[{i}]", v) for i, v in enumerate(srcs)}
    skip = _enum(oob_mode if oob_mode is not None else "error", _OOB_MODE, "oob_mode") == "skip"
    if not isinstance(unique_indices, bool):
        raise NkiError(f"{name}: unique_indices must be True or False, got {unique_indices!r}")
    for role, t in (("dst", dst), *((f"srcs[{i}]", v) for i, v in enumerate(sources.values()))):
        if t.buffer == "psum":
            raise NkiError(f"{name}: '{role}' cannot be in PSUM", "copy PSUM to SBUF with nisa.tensor_copy first")
    dynamic = any(t.dyn is not None for t in (dst, *sources.values()))
    # reduce_op, scales, element counts, unique indices, at most 16 sources (target/rules/pe.py)
    _rules(ctx, name, {"dst": dst, **sources}, {
        "reduce_op": alu_op(reduce_op, "reduce_op"), "scales": None if scales is None else list(scales),
        "n_srcs": len(srcs), "unique_indices": unique_indices, "dynamic": dynamic,
        "names": {f"src{i}": f"srcs[{i}]" for i in range(len(srcs))}})  # fmt: skip
    if dynamic:
        _dma_compute_rmw(name, dst, list(sources.values()), unique_indices)
    attrs = {"reduce_op": "add", "oob_skip": skip or None}
    rest = list(sources.values())
    if len(rest) > DMA_COMPUTE_MAX_SRCS:  # a chain through a float32 running sum (see the docstring)
        acc = ctx.allocate(tuple(dst.shape), "float32", "sbuf" if dst.on_chip else "private_hbm", "", None)
        head, rest = rest[:DMA_COMPUTE_MAX_SRCS], rest[DMA_COMPUTE_MAX_SRCS:]
        _record(ctx, name, {"dst": acc, **{f"src{i}": t for i, t in enumerate(head)}}, attrs)
        while len(rest) > DMA_COMPUTE_MAX_SRCS - 1:
            head, rest = rest[: DMA_COMPUTE_MAX_SRCS - 1], rest[DMA_COMPUTE_MAX_SRCS - 1 :]
            _record(ctx, name, {"dst": acc, **{f"src{i}": t for i, t in enumerate((acc, *head))}}, attrs)
        rest = [acc, *rest]
    _record(ctx, name, {"dst": dst, **{f"src{i}": t for i, t in enumerate(rest)}}, attrs)


def _same_view(a: NkiTensor, b: NkiTensor) -> bool:
    """The same elements of the same tensor, by the same (static or dynamic) addressing."""
    same_dyn = a.dyn is b.dyn or (a.dyn is not None and b.dyn is not None and a.dyn.kind == b.dyn.kind
                                  and a.dyn.scale == b.dyn.scale and a.dyn.register is b.dyn.register
                                  and a.dyn.index is not None and b.dyn.index is not None
                                  and _same_view(a.dyn.index, b.dyn.index))  # fmt: skip
    return (a.storage is b.storage and a.pairs == b.pairs and a.dtype == b.dtype and same_dyn
            and str(a.offset) == str(b.offset))  # fmt: skip


def _dma_compute_rmw(name: str, dst: NkiTensor, srcs: list[NkiTensor], unique: bool) -> None:
    """NKI's read-modify-write forms of dma_compute (a dynamic operand): exactly two sources, one of them ``dst``
    itself (gather RMW: ``dst`` static; scatter RMW: ``dst`` dynamic, read by the same dynamic view)."""
    if len(srcs) != DMA_COMPUTE_RMW_SRCS:
        raise NkiError(f"{name}: with a dynamic (vector_offset / scalar_offset) operand it is a read-modify-write "
                       f"and takes exactly {DMA_COMPUTE_RMW_SRCS} sources, got {len(srcs)}")  # fmt: skip
    if not unique:
        raise NkiError(f"{name}: unique_indices=False is not supported with a dynamic operand",
                       "NKI's read-modify-write requires unique indices")  # fmt: skip
    if not any(_same_view(s, dst) for s in srcs):
        form = "scatter (dst dynamic)" if dst.dyn is not None else "gather (dst static)"
        raise NkiError(f"{name}: a read-modify-write {form} needs one source that is dst itself (the same view)",
                       "pass srcs=[<dynamic source>, dst] (gather) or srcs=[dst, <data>] (scatter)")  # fmt: skip
    other = [s for s in srcs if not _same_view(s, dst)] or srcs[1:]
    if dst.dyn is not None and other[0].dyn is not None:
        raise NkiError(f"{name}: a scatter read-modify-write reads its data (the other source) statically")


# -- the LNC=2 pair: two NeuronCores of one kernel[2] launch (ARCHITECTURE.md, "The LNC=2 pair") ----------------
_DMA_ENGINE = dma_engine  # sendrecv's parameter named `dma_engine` shadows the enum


def _rank(ctx: Any, op: str, name: str, value: Any, in_launch: bool = True) -> int:
    """A core of the LNC=2 pair: 0 or 1, and (``in_launch``) a program of this launch (rank r is program r)."""
    rank = _int_param(op, name, value)
    if not 0 <= rank < LNC_MAX_RANKS:
        raise NkiError(f"{op}: {name} must be 0 or 1 (a core of the LNC=2 pair), got {rank}")
    if in_launch and rank >= ctx.grid:
        raise NkiError(
            f"{op}: {name} = {rank} names no core of this launch, which runs {ctx.grid} program(s)",
            "launch the kernel on the LNC=2 pair as kernel[2]; rank r is nl.program_id(0) == r",
        )
    return rank


@nki_op
def sendrecv(
    ctx: Any, src: NkiTensor, dst: NkiTensor, send_to_rank: Any, recv_from_rank: Any, pipe_id: Any,
    dma_engine: Any = None, **kw: Any,
) -> None:
    """Send ``src`` to the ``dst`` of core ``send_to_rank`` while receiving core ``recv_from_rank``'s ``src`` into
    this core's ``dst``. The cores' sendrecvs of one ``pipe_id`` pair up in the order each core issues them (nkic
    issues a core's sendrecvs in program order) and complete together; both tiles in SBUF, one dtype, equal
    partitions and elements per partition. A rank may be the core itself (a local copy)."""
    name = "sendrecv"
    src, dst = _tensor(name, "src", src), _tensor(name, "dst", dst)
    # memories, one dtype, equal sizes, ranks 0 or 1 (target/rules/pe.py); then the ranks this launch has
    _rules(ctx, name, {"dst": dst, "src": src}, {"send_to_rank": _int_param(name, "send_to_rank", send_to_rank),
                                                 "recv_from_rank": _int_param(name, "recv_from_rank", recv_from_rank)})
    send, recv = _rank(ctx, name, "send_to_rank", send_to_rank), _rank(ctx, name, "recv_from_rank", recv_from_rank)
    pipe = _int_param(name, "pipe_id", pipe_id)
    if pipe < 0:
        raise NkiError(f"{name}: pipe_id must be >= 0, got {pipe}")
    mode = _enum(dma_engine if dma_engine is not None else "dma", _DMA_ENGINE, "dma_engine")
    attrs = {"send_to_rank": send, "recv_from_rank": recv, "pipe_id": pipe, "gpsimd_dma": mode == "gpsimd_dma"}
    problem = sendrecv_problem(attrs.get, src.itemsize, src.free_size)
    if problem is not None:
        raise NkiError(problem, "use dma_engine=nisa.dma_engine.dma for larger tiles")
    # gpsimd_dma is GpSimd's own DMA: it implies GpSimd as the trigger engine.
    eng = "gpsimd" if attrs["gpsimd_dma"] else "unknown"
    _record(ctx, name, {"dst": dst, "src": src}, {**attrs, "engine": eng}, eng)


@nki_op
def core_barrier(ctx: Any, data: NkiTensor, cores: Any, engine: Any = None, **kw: Any) -> None:
    """Every core of ``cores`` waits here until all of them have arrived, with all their earlier work done (nkic
    stops every engine of the core, not only ``engine``: a stronger barrier that orders everything on the core).
    ``data`` is the tensor the cores synchronise on; ``cores`` is (0, 1) on the LNC=2 pair. A core the launch
    does not have waits for nobody: nki-library writes ``(0, 1)`` in kernels that also run as one program.
    The docs ask for shared HBM, but the barrier is a semaphore protocol that never touches ``data`` and
    nki-library's router_topk (moe_block_tkg's default selective path) barriers on an SBUF tensor: nkic accepts
    HBM or SBUF (PSUM is rejected: no core shares it)."""
    name = "core_barrier"
    data = _tensor(name, "data", data)
    if str(data.buffer) == "psum":
        raise NkiError(f"{name}: 'data' must be a tensor in HBM or SBUF, not {data.buffer}",
                       "the barrier orders the cores' accesses to a shared tensor")  # fmt: skip
    if not isinstance(cores, (tuple, list)) or not cores:
        raise NkiError(f"{name}: cores must be a tuple of core ranks such as (0, 1), got {cores!r}")
    # cores of the pair (0, 1) only (target/rules/pe.py)
    _rules(ctx, name, {"data": data}, {"cores_given": tuple(_int_param(name, f"cores[{i}]", c) for i, c in enumerate(cores))})
    ranks = [_rank(ctx, name, f"cores[{i}]", c, in_launch=False) for i, c in enumerate(cores)]
    if len(set(ranks)) != len(ranks):
        raise NkiError(f"{name}: cores {tuple(ranks)} names a core twice")
    if ctx.program_rank not in ranks:
        raise NkiError(f"{name}: cores {tuple(ranks)} does not include this core (program {ctx.program_rank})")
    ranks = [r for r in ranks if r < ctx.grid]
    eng = _enum(engine, _ENGINE, "engine")
    eng = "gpsimd" if eng == "unknown" else eng
    _record(ctx, name, {"data": data}, {"cores": tuple(sorted(ranks)), "engine": eng}, eng)


def _take_masks() -> None:
    """Every instruction takes ``mask=`` (the legacy surface passes it; ``mask=None`` is the default): its operands
    are cut to the mask's box before the instruction checks them (``frontend/grid.py``). Done here once, for every
    nki op of this module, so a path into an instruction — a nisa call, an nl function, a legacy wrapper calling
    ``__nki_impl__`` — cannot skip it."""
    for name, op in list(globals().items()):
        if is_nki_op(op) and getattr(op, "__module__", "") == __name__:
            op.__nki_impl__ = masked(name, op.__nki_impl__)


_take_masks()

# Names nkic lacks are placeholders that raise NkiError when called (``frontend/unsupported.py``).
__getattr__ = missing_names("nki.isa")
