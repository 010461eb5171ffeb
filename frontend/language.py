"""``nki.language`` (nl): buffers, dtypes, tile sizes, allocation, loops, SPMD queries and operator tokens.

Every function here is an nki op (see ``context.nki_op``): it only works while a kernel is being traced. Constants
(dtypes, buffers, ``tile_size``, operator tokens, ``fp32``) are plain values usable anywhere.
"""

from __future__ import annotations

import builtins
import copy as _copy  # `copy` itself is the nl.copy token in this namespace
import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

from nkic.frontend.affine import DynSlice
from nkic.frontend.context import active_context, is_nki_op, nki_op
from nkic.frontend.context import default_target as _default_target
from nkic.frontend.recorders.masks import ambient_mask as _ambient_mask
from nkic.frontend.recorders.masks import masked, refuse_mask, with_mask
from nkic.frontend.dtypes import BUFFERS, Buffer, dtype, normalize_buffer
from nkic.frontend.dtypes import itemsize as tensor_itemsize
from nkic.frontend import isa as _nisa  # records instructions (nl.device_print's)
from nkic.frontend.recorders.record import _record as _record_instruction  # nl.device_print records one
from nkic.frontend.recorders.record import language_rules as _language_rules
from nkic.frontend import tiles
from nkic.frontend import era02 as _era02  # NKI 0.2 idioms (string buffers)
from nkic.frontend.control import dynamic_range, fori_loop, no_reorder_block, while_loop  # noqa: F401 — runtime loops
from nkic.frontend.errors import NkiError
from nkic.target.vocab import DTYPE_RECORDS
from nkic.frontend.ops import ALIASES, TOKENS, OpToken
from nkic.frontend.tensor import NkiTensor
from nkic.frontend.unsupported import missing_names
from nkic.target.isa import MAX_STRING_LENGTH
from nkic.target.machine import DEFAULT_TARGET, Target, get_target

# -- buffers ----------------------------------------------------------------------------------------------
MemoryRegion = Buffer  # the reference's type of the buffers below (members sbuf, psum, private_hbm, shared_hbm)
sbuf: Buffer = BUFFERS["sbuf"]
psum: Buffer = BUFFERS["psum"]
hbm: Buffer = BUFFERS["hbm"]
shared_hbm: Buffer = BUFFERS["shared_hbm"]
private_hbm: Buffer = BUFFERS["private_hbm"]


def is_hbm(buffer: Any) -> bool:
    return normalize_buffer(buffer).is_hbm


def is_sbuf(buffer: Any) -> bool:
    return normalize_buffer(buffer) == sbuf


def is_psum(buffer: Any) -> bool:
    return normalize_buffer(buffer) == psum


def is_on_chip(buffer: Any) -> bool:
    return normalize_buffer(buffer).on_chip


# -- dtypes: canonical names, as instances of the dtype type ---------------------------------------------------
DType = dtype  # the reference's name for the type (``DType = str`` there)
# Every dtype of the records (target/vocab.py DTYPE_RECORDS) is nl.<name>: float32, bfloat16, ..., tfloat32 (float32
# storage; the Tensor Engine drops the low 13 mantissa bits). The MX ones stay known-but-unsupported outside their
# instructions: nki-library builds import-time tables keyed by them (kernel_helpers.py).
for _record in DTYPE_RECORDS:
    globals()[_record.name] = dtype(_record.name)
bool = globals()["bool_"]  # noqa: A001 — nki-library spells it nl.bool


class _Finfo:
    def __init__(self, min: float, max: float):  # noqa: A002
        self.min, self.max = min, max


fp32 = _Finfo(-3.4028235e38, 3.4028235e38)
bfp16 = _Finfo(float("-inf"), float("inf"))


# -- tile sizes --------------------------------------------------------------------------------------------------
def _target() -> Target:
    ctx = active_context()
    if ctx is not None:
        return get_target(ctx.options.target)
    return get_target(_default_target())


_GEN = get_target(DEFAULT_TARGET)  # the tile constants that do not depend on the generation


class _TileSize:
    """``nl.tile_size``: hardware tile limits; the SBUF sizes follow the compile target."""

    pmax = _GEN.num_partitions
    psum_fmax = _GEN.psum_bank_bytes // 4
    psum_bank_fmax = _GEN.psum_bank_bytes // 4
    psum_bank_fmax_bytes = _GEN.psum_bank_bytes
    psum_num_banks = _GEN.psum_banks
    gemm_stationary_fmax = _GEN.matmul_max_m
    gemm_moving_fmax = _GEN.matmul_max_n  # stays 512 on gen4 too, although gen4 matmuls accept more
    bn_stats_fmax = _GEN.bn_stats_fmax
    psum_min_align = 4
    sbuf_min_align = 1

    @property
    def total_available_sbuf_size(self) -> int:
        return _target().sbuf_bytes_per_partition

    sbuf_fmax_bytes = total_available_sbuf_size

    @property
    def sbuf_fmax(self) -> int:
        return self.total_available_sbuf_size // 4

    @property
    def sbuf_size_bytes(self) -> int:
        return _target().sbuf_physical_bytes


tile_size = _TileSize()


# -- operator tokens ----------------------------------------------------------------------------------------
def _export_tokens() -> None:
    g = globals()
    for name, token in {**TOKENS, **ALIASES}.items():
        g[name] = token


_export_tokens()
add: OpToken
exp: OpToken  # (all tokens are exported by _export_tokens; two listed for readers and type checkers)


# -- tile functions (frontend/tiles.py) -----------------------------------------------------------------------
def _export_tile_functions() -> None:
    """``nl.load``, ``nl.matmul``, ``nl.softmax`` …; a name that is also an operator token (``nl.add``,
    ``nl.exp``, ``nl.sum``) stays the token, whose call runs the same function."""
    g = globals()
    for name in tiles.__all__:
        if not isinstance(g.get(name), OpToken):
            g[name] = getattr(tiles, name)


_export_tile_functions()


# -- allocation ---------------------------------------------------------------------------------------------
@nki_op
def ndarray(
    ctx: Any, shape: Sequence[int], dtype: Any, buffer: Any = sbuf, name: str = "", address: Any = None, **_: Any
) -> NkiTensor:
    """A new tensor with undefined contents."""
    _era02.string_buffer(buffer)
    return ctx.allocate(shape, dtype, buffer, name, address)


@nki_op
def empty_like(ctx: Any, x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "", **_: Any) -> NkiTensor:
    _era02.string_buffer(buffer)
    return ctx.allocate(x.shape, dtype or x.dtype, buffer or x.buffer, name, None)  # NKI: same buffer as x


def _filled(ctx: Any, shape: Any, value: float, dtype: Any, buffer: Any, name: str) -> NkiTensor:
    _era02.string_buffer(buffer)
    t = ctx.allocate(shape, dtype, buffer, name, None)
    if not t.on_chip:
        raise NkiError("initial values on HBM tensors are not supported", "fill an SBUF tile and dma_copy it")
    for part in _fill_parts(ctx, t):
        _nisa.memset.__nki_impl__(ctx, part, value)
    return t


def _fill_parts(ctx: Any, t: NkiTensor) -> list[NkiTensor]:
    """What one fill instruction each covers: the whole storage (one memset for every block), or for a legacy block
    tensor whose blocks must be placed apart, each block. Apart means: the declaration is larger than its memory
    (the device compiler allocates the live blocks, ``passes/split_blocks.py``, which needs every instruction inside
    one block), or PSUM larger than a bank (a PSUM block never spans banks, and neither may a memset's PSUM tile:
    "Maximum free dimension per PSUM bank per partition", nki.language.tile_size). A block tensor that fits keeps one
    memset, the fewest instructions."""
    nb = t.block_dims
    if not nb:
        return [t]
    target = get_target(ctx.options.target)
    row = math.prod(t.storage.shape[1:]) * tensor_itemsize(t.storage.dtype)  # storage [P, B, F]: bytes per partition
    limit = target.psum_bank_bytes if t.storage.buffer.name == "psum" else target.sbuf_bytes_per_partition
    if row <= limit:
        return [_whole_storage(t)]
    if _ambient_mask():
        raise NkiError("mask= on the fill of a block tensor (dims before nl.par_dim) is not supported",
                       "fill it whole, then mask the instructions that read it")  # fmt: skip
    parts = []
    for index in itertools.product(*(range(n) for _, n in t.pairs[:nb])):
        offset = t.offset + builtins.sum(i * step for i, (step, _) in zip(index, t.pairs[:nb]))
        parts.append(NkiTensor(t.storage, offset, tuple(t.pairs[nb:]), t.dtype))
    return parts


def _whole_storage(t: NkiTensor) -> NkiTensor:
    """``t`` itself, or for a legacy block tensor ``(B, nl.par_dim(P), F)`` (``nl.zeros`` of one fills every block)
    the same elements as one tile in storage order ``(P, B, F)``: a single memset covers all blocks."""
    nb = t.block_dims
    if not nb:
        return t
    if _ambient_mask():
        raise NkiError("mask= on the fill of a block tensor (dims before nl.par_dim) is not supported",
                       "fill it whole, then mask the instructions that read it")  # fmt: skip
    return NkiTensor(t.storage, t.offset, (t.pairs[nb], *t.pairs[:nb], *t.pairs[nb + 1 :]), t.dtype)


@nki_op
def zeros(ctx: Any, shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **_: Any) -> NkiTensor:
    return _filled(ctx, shape, 0, dtype, buffer, name)


@nki_op
def ones(ctx: Any, shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **_: Any) -> NkiTensor:
    return _filled(ctx, shape, 1, dtype, buffer, name)


@nki_op
def full(
    ctx: Any, shape: Any, fill_value: float, dtype: Any, buffer: Any = sbuf, name: str = "", **_: Any
) -> NkiTensor:
    return _filled(ctx, shape, fill_value, dtype, buffer, name)


@nki_op
def zeros_like(ctx: Any, x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "", **_: Any) -> NkiTensor:
    return _filled(ctx, x.shape, 0, dtype or x.dtype, buffer or sbuf, name)


# -- indexing and loops -------------------------------------------------------------------------------------
@nki_op
def ds(ctx: Any, start: Any, size: int) -> DynSlice:
    """The slice ``start:start+size``; ``start`` may be a loop-variable expression."""
    return DynSlice(start, size)


@nki_op
def affine_range(ctx: Any, start: Any, stop: Any = None, step: Any = 1, **_: Any) -> Any:
    """A loop without carried dependencies, kept as a symbolic loop unless the body needs the value."""
    return ctx.loop("affine", start, stop, step)


@nki_op
def sequential_range(ctx: Any, start: Any, stop: Any = None, step: Any = 1, **_: Any) -> Any:
    """A loop with carried dependencies, kept as a symbolic loop unless the body needs the value."""
    return ctx.loop("sequential", start, stop, step)


@nki_op
def static_range(ctx: Any, start: Any, stop: Any = None, step: Any = 1, **_: Any) -> range:
    """A loop unrolled at trace time."""
    return ctx.loop("static", start, stop, step)


@nki_op
def range(ctx: Any, start: Any, stop: Any = None, step: Any = 1, **_: Any) -> builtins.range:  # noqa: A001
    """``nl.range``: the loop functions are documented as aliases of Python's ``range()`` (nki-library writes
    ``for k in nl.range(n)``), so this is ``static_range``: unrolled at trace time, the index a plain int."""
    return ctx.loop("static", start, stop, step)  # type: ignore[no-any-return]


def no_reorder() -> Any:
    """Scheduling directive (``sequential_range(directives=…)`` or ``with``): nkic keeps program order anyway; as a
    ``with`` block it marks where a register-based dynamic loop is not allowed (``frontend/control.py``)."""
    return no_reorder_block()


# -- SPMD ---------------------------------------------------------------------------------------------------
@nki_op
def program_id(ctx: Any, axis: int = 0) -> int:
    return ctx.program_id(axis)


@nki_op
def num_programs(ctx: Any, axes: Any = 0) -> int:
    return ctx.num_programs(axes)


@nki_op
def program_ndim(ctx: Any) -> int:
    return ctx.program_ndim()


class nc:  # noqa: N801 — NKI's spelling
    """``nl.nc(k)``: a grid factor of ``k`` NeuronCores. It only decides which core runs which program, so for nkic,
    which simulates the programs one after the other, ``a * nl.nc(k)`` is a grid dimension of ``a·k`` programs."""

    def __init__(self, k: int):
        self.k = int(k)

    def __mul__(self, other: Any) -> int:
        return spmd_dim(other, self)

    __rmul__ = __mul__

    def __index__(self) -> int:
        return self.k

    def __repr__(self) -> str:
        return f"nl.nc({self.k})"


def spmd_dim(*factors: Any) -> int:
    """One launch-grid dimension, the product of its factors (``nl.spmd_dim(a, nl.nc(2))`` has ``2a`` programs)."""
    size = 1
    for f in factors:
        size *= f.k if isinstance(f, nc) else int(f)
    return size


def _print_instruction(ctx: Any, src: NkiTensor, print_prefix: str) -> None:
    """The DEBUG_PRINT instruction of ``nl.device_print`` (``grid.masked`` cuts ``src`` to a mask's box first)."""
    _record_instruction(ctx, "device_print", {"src": src}, {"prefix": print_prefix})


_print_masked = masked("device_print", _print_instruction)


@nki_op
def device_print(ctx: Any, print_prefix: Any = None, tensor: Any = None, **kw: Any) -> None:
    """Print ``print_prefix``, a space and the value of ``tensor`` (an SBUF or HBM tensor) when the kernel runs.

    This is one instruction in the program (target/instructions.py, ``device_print``: a DMA of the tile to the
    host's debug stream), so it shows the value the tensor has at that point of the run: after the instructions
    that write it before the call, before the ones that write it after (they wait for it). The simulator prints
    the line to stdout each time the instruction executes (once per iteration in a loop); a timing-only run prints
    nothing. The line is what ``print(print_prefix, value)`` writes, ``value`` the tile as a numpy array of its
    shape and dtype. The prefix is evaluated at trace time and must be a ``str``: inside an ``affine_range`` loop,
    traced once, a loop index formatted into it shows as its symbolic name (``i0``), the same for every iteration.
    The legacy spelling ``device_print(prefix, x, mask=...)`` is accepted; ``mask=`` cuts the tensor to its box."""
    if "prefix" in kw and print_prefix is None:
        print_prefix = kw.pop("prefix")
    if "x" in kw and tensor is None:
        tensor = kw.pop("x")
    _language_rules(ctx, "device_print", {}, print_prefix=print_prefix)
    prefix = str.__str__(print_prefix)  # a str subclass (an nl dtype) prints as its text
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise NkiError("nl.device_print: print_prefix is not valid Unicode text (it holds a lone surrogate)") from None
    if len(prefix) > MAX_STRING_LENGTH:
        raise NkiError(f"nl.device_print: print_prefix has {len(prefix)} characters, at most {MAX_STRING_LENGTH}")
    if not isinstance(tensor, NkiTensor):
        raise NkiError(f"nl.device_print: 'tensor' must be a tensor in SBUF or HBM, got {type(tensor).__name__}")
    if tensor.buffer == psum:  # "Can be in SBUF or HBM"
        raise NkiError(f"nl.device_print: 'tensor' must be in SBUF or HBM, not {tensor.buffer}",
                       "copy it to SBUF first (nisa.tensor_copy / nl.copy)")  # fmt: skip
    if tensor.dyn is not None:
        raise NkiError("nl.device_print: 'tensor' cannot be a dynamic access pattern (scalar_offset / "
                       "vector_offset)", "print the tensor the view selects from")  # fmt: skip
    _print_masked(ctx, tensor, prefix)


device_print.__nki_impl__ = with_mask(device_print.__nki_impl__)  # type: ignore[attr-defined]


# -- NKIObject ----------------------------------------------------------------------------------------------
class NKIObject:
    """Base of kernel configuration classes, constructible positionally (in field order) and by keyword.

    nki-library declares fields as plain class attributes (``section_idx = 0``) as well as annotations, and builds
    instances both ways (``Cfg(a, b)``, ``Cfg(tile=64)``). Like KLR's rule, every non-callable, non-dunder class
    attribute is turned into an annotated field before ``dataclass`` runs. The fields are marked keyword-only only
    so that CPython's dataclass machinery accepts a field with a default before one without; the ``__init__`` that
    every subclass gets (``_nki_object_init``, placed in the class body so that a stacked ``@dataclass`` keeps it)
    also takes them positionally. Instances are compile-time constants (hashable by value through
    ``tracer.constant_key``). A field the constructor is given no value for and that has no default stays unset:
    reading it is an AttributeError (the class keeps a ``dataclasses.Field`` there, which is never a value).
    """

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if isinstance(value, dataclasses.Field):
            raise AttributeError(f"'{type(self).__name__}' field '{name}' was never set")
        return value

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        annotations = cls.__dict__.get("__annotations__", {})
        if "__annotations__" not in cls.__dict__:
            cls.__annotations__ = annotations
        for name, value in list(cls.__dict__.items()):
            if name.startswith("__") or name in annotations or _is_method_like(value):
                continue
            annotations[name] = Any
        for name in annotations:
            value = cls.__dict__.get(name, dataclasses.MISSING)
            if isinstance(value, (list, dict, set)):
                setattr(cls, name, dataclasses.field(default_factory=lambda v=value: _copy.deepcopy(v)))
        if "__init__" not in cls.__dict__:
            # dataclass never replaces a method defined in the class itself, so a stacked @dataclass keeps this one.
            cls.__init__ = _nki_object_init  # type: ignore[method-assign]
        dataclasses.dataclass(cls, init=False, kw_only=True)
        for f in dataclasses.fields(cls):
            if f.name in annotations and f.name not in cls.__dict__:
                # dataclass dropped the class attribute (no default / a factory): put a Field back so that a
                # stacked @dataclass sees the same keyword-only field instead of a bare annotation.
                setattr(cls, f.name, dataclasses.field(default_factory=f.default_factory, kw_only=True))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _nki_object_init(self, *args, **kwargs)


def _nki_object_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Fill the dataclass fields from ``args`` (declaration order), then ``kwargs``, then the defaults."""
    fields = [f for f in dataclasses.fields(self) if f.init]
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes {len(fields)} positional arguments but {len(args)} were given")
    for f, value in zip(fields, args):
        if f.name in kwargs:
            raise TypeError(f"{type(self).__name__}() got multiple values for argument '{f.name}'")
        kwargs[f.name] = value
    for f in fields:
        if f.name in kwargs:
            value = kwargs.pop(f.name)
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            # NKIObject(**kwargs) sets what it is given: a field without value or default stays unset, and only
            # reading it fails (nki-library's MLPTKGConstantsDimensionSizes declares a field it never sets).
            continue
        object.__setattr__(self, f.name, value)
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments {sorted(kwargs)}")
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _is_method_like(value: Any) -> bool:
    return callable(value) or isinstance(value, (staticmethod, classmethod, property)) or hasattr(value, "__get__")


def _masks() -> None:
    """``mask=`` is never silently ignored: the filling constructors fill only the mask's elements (their memset
    inherits it, ``grid.with_mask``), the value-returning tile functions already take it (``tiles._export``), and
    every other nl function refuses a mask that is not None."""
    for name, op in list(globals().items()):
        if not is_nki_op(op) or getattr(op.__nki_impl__, "__nki_masked__", False):
            continue
        if name in ("zeros", "ones", "full", "zeros_like"):
            op.__nki_impl__ = with_mask(op.__nki_impl__)
        else:
            op.__nki_impl__ = refuse_mask(f"nl.{name}", op.__nki_impl__)


_masks()

# Names nkic lacks are placeholders that raise NkiError when called (``frontend/unsupported.py``).
__getattr__ = missing_names("nki.language")
