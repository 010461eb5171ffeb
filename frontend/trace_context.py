"""One trace attempt: ``TraceContext`` re-executes a kernel's body and records what it does, plus what a trace is
given and produces (``CompileOptions``, ``TensorSpec``, ``TracedKernel``).

``tracer.py`` drives it (``Kernel`` → specialise → trace attempts until no loop needs unrolling) and its docstring
lists the ``TraceContext.call`` rules; ``context.py`` makes the running ``TraceContext`` the ambient one every nki
call fetches.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import inspect
import linecache
import math
import operator
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nkic.frontend import era02
from nkic.frontend.affine import IndexExpr, LoopVar
from nkic.frontend.context import activate, deactivate, default_target, is_nki_op
from nkic.frontend.dtypes import BUFFERS, itemsize, normalize_buffer, normalize_dtype
from nkic.frontend.emit import Affine, Loc, Operand
from nkic.frontend.errors import NeedsUnroll, NkiError, NkiWarning, pinned_call, user_frame, user_location
from nkic.frontend.grid import block_layout, split_par_dim
from nkic.frontend.recorders import PUBLIC_MODULE
from nkic.frontend.recorders.movement import dma_copy
from nkic.frontend.instruction import NkiInstruction
from nkic.frontend.loop_tiles import LoopTiles
from nkic.frontend.peak_live import PeakLive
from nkic.frontend.tensor import NkiTensor, Storage, block_view, contiguous_pairs
from nkic.frontend.unsupported import keyword_hint
from nkic.frontend.varnames import assigned_name
from nkic.target.instructions import INSTRUCTIONS
from nkic.target.limits import INSTRUCTIONS_VAR, TRIP_COUNT_VAR, max_instructions, max_trip_count
from nkic.target.machine import get_target
from nkic.target.names import safe_name


@dataclass(frozen=True)
class CompileOptions:
    target: str = field(default_factory=default_target)
    skip_middle_end_transformations: bool = False
    enable_stack_allocator: bool = False
    carrier_format: str = "bir"
    extra: tuple[tuple[str, Any], ...] = ()  # tolerated options nkic does not interpret (mode=, …)


@dataclass(frozen=True)
class TensorSpec:
    """A compile-only placeholder for an array argument."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))


@dataclass
class TracedKernel:
    module: Any
    name: str
    inputs: list[tuple[str, tuple[int, ...], str]]
    # (variable, shape as returned, dtype): a kernel may return a reshape of a whole tensor (the runner reshapes).
    outputs: list[tuple[str, tuple[int, ...], str]]
    grid: int
    options: CompileOptions
    returns_tuple: bool
    # (input, output): an input the kernel writes, and the kernel output that holds its final contents. The runner
    # copies it back into the caller's array (NKI's simulator does the same); a returned input is returned as it.
    # Under a grid the output is the input itself (its contents after every program ran), and so is a returned input.
    written_inputs: tuple[tuple[str, str], ...] = ()
    # Output variable -> the user's name for it where that differs (``result = nl.ndarray(...)`` is NEFF variable
    # ``out``): what messages about the outputs call them.
    labels: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------------------
# Kernel
# ------------------------------------------------------------------------------------------------------------
# The legacy surface's treatment of an on-chip tile a kernel returns (frontend/legacy/language.py): the tensor to
# return instead, or None where the modern rule (an error) applies.
RETURN_ON_CHIP: Callable[[Any, Any, NkiTensor], NkiTensor | None] | None = None


def param_name(name: str) -> str:
    """The name a kernel input keeps through the IR and the NEFF. IR value names drop a ``_<digits>`` suffix (the
    printer's uniquing suffix), so ``in_1`` and ``in_2`` (or the ``args_0``, ``args_1`` of ``*args``) would
    collide; such names get a trailing underscore."""
    name = safe_name(name, "arg")
    return f"{name}_" if re.search(r"_\d+$", name) else name


def _array_dtype(name: str, value: Any) -> str:
    if isinstance(value, TensorSpec):
        return value.dtype
    try:
        return normalize_dtype(value.dtype)
    except NkiError as e:
        raise NkiError(f"{e.what} for kernel argument '{name}'", e.hint) from None


class TraceContext:
    """The state of one trace attempt: the emitter, open symbolic loops, names, and SPMD bookkeeping."""

    def __init__(self, kernel: Any, emitter: Any, unrolled: set[tuple[str, int, int]]):
        self.kernel = kernel
        self.emitter = emitter
        self.options = kernel.options
        self.grid = kernel.num_programs
        self.grid_shape: tuple[int, ...] = kernel.grid or ()
        self.unrolled = unrolled
        self.pending_unroll: set[tuple[str, int, int]] = set()
        self.rolled_sites: set[tuple[str, int, int]] = set()  # loops traced symbolically in this attempt
        self.loops: list[LoopVar] = []  # open symbolic loops, outermost first (index = loop depth)
        self._emitted: list[Any] = []  # every penguin instruction traced, in order (for NkiInstruction handles)
        self._last_loc: Loc | None = None  # where the last of them was traced
        self.fresh_matmul: Any = None  # the PSUM tile a matmul call just returned (recorders/psum_accumulate.py)
        self.concrete_depth = 0  # > 0 while a dont_trace helper runs
        self.live = False
        self._pid = 0
        self._owner: object = None
        self._names: set[str] = set()
        self._next_suffix: dict[str, int] = {}  # base -> the suffix _unique last gave it (see _unique)
        self._shared: list[Storage] = []  # program 0's shared_hbm allocations, in order
        self._shared_seen = 0
        self._constants: dict[str, Storage] = {}  # nl.shared_constant tensors of the program being traced
        self._site_counts: dict[tuple[str, int], int] = {}
        self._api_call = ""  # the outermost nki API function being called ("nl.softmax"), named on its instructions
        self.registers = 0  # virtual registers allocated in the program being traced (register 0 reads as zero)
        self.dynamic_loops: list[tuple[str, int]] = []  # open runtime loops (dynamic_range, ...): where they began
        self.register_whiles: list[tuple[Any, int, Any, int]] = []  # open `while reg:`: frame, line, reg, lasti
        self.loop_tiles = LoopTiles()  # unrolled loops' tiles, to warn about one read after its loop (per program)
        self.instructions = 0  # traced so far, every SPMD program together (target/limits.py)
        self.max_instructions = max_instructions()
        self.peak_live = PeakLive(self.options.target)  # the live working set, checked as the trace grows

    # -- driving ----------------------------------------------------------------------------------------
    def run(self, bound: inspect.BoundArguments, arrays: list[tuple[str, Any]]) -> TracedKernel:
        token = activate(self)
        self.live = True
        try:
            outputs: list[Storage] = []
            returns_tuple = False
            written: tuple[tuple[str, str], ...] = ()
            shapes: list[tuple[int, ...]] = []
            for pid in range(self.grid):
                outs, returns_tuple, aliases = self._run_program(pid, bound)
                if pid == 0:
                    outputs, written, shapes = outs, aliases, self._returned_shapes
                elif [s.name for s in outs] != [s.name for s in outputs] or self._returned_shapes != shapes:
                    raise NkiError("every SPMD program must return the same shared_hbm tensors")
                else:  # an input any program writes is read back (one program may write none)
                    written += tuple(a for a in aliases if a not in written)
            module = self.emitter.finish(get_target(self.options.target).name)
        finally:
            self.live = False
            deactivate(token)
        inputs = [(n, tuple(v.shape), _array_dtype(n, v)) for n, v in arrays]
        # A returned whole-tensor reshape keeps its storage as the NEFF variable; the runner reshapes the result.
        outs_info = [(s.name, shape, s.dtype) for s, shape in zip(outputs, shapes, strict=True)]
        name = safe_name(self.kernel.name, "kernel")  # the NEFF name (a Python identifier may be non-ASCII)
        labels = {s.name: s.label for s in outputs if s.label and s.label != s.name}
        return TracedKernel(module, name, inputs, outs_info, self.grid, self.options, returns_tuple, written, labels)

    def _run_program(
        self, pid: int, bound: inspect.BoundArguments
    ) -> tuple[list[Storage], bool, tuple[tuple[str, str], ...]]:
        self._pid, self._owner = pid, object()
        self._names = {s.name for s in self._shared}
        self._next_suffix = {}
        self._shared_seen = 0
        self._constants = {}
        self._site_counts = {}
        self.registers = 0
        self.dynamic_loops = []
        self.register_whiles = []
        self.loop_tiles = LoopTiles()
        self.peak_live.reset()
        self._params: list[Storage] = []
        self._kernel_frame: Any = None
        self.emitter.begin_program(pid)
        arguments = dict(bound.arguments)
        params = bound.signature.parameters
        for name, value in bound.arguments.items():
            kind = params[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                arguments[name] = tuple(self._arg(param_name(f"{name}_{i}"), v) for i, v in enumerate(value))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                arguments[name] = {k: self._arg(param_name(k), v) for k, v in value.items()}
            else:
                arguments[name] = self._arg(param_name(name), value)
        call = inspect.BoundArguments(bound.signature, arguments)  # type: ignore[arg-type]
        result = self.kernel.func(*call.args, **call.kwargs)
        assert not self.loops, "symbolic loop left open"
        self.peak_live.check()
        if self.dynamic_loops:
            raise NkiError("a runtime loop (nl.dynamic_range) was left with break or return",
                           "its trip count must come from its bounds; compute it into a register",
                           where=self.dynamic_loops[-1])  # fmt: skip
        outputs, returns_tuple = self._outputs(result)
        self.loop_tiles.warn()
        outputs, hidden, aliases = self._alias_inputs(outputs)
        # Under a grid a returned input stays an input (read back after the run), not a result of the program.
        self.emitter.end_program([s.handle for s in outputs + hidden if not s.is_param])
        return outputs, returns_tuple, aliases

    def _alias_inputs(self, outputs: list[Storage]) -> tuple[list[Storage], list[Storage], tuple[tuple[str, str], ...]]:
        """Give every written or returned input an output holding its final contents (a whole-tensor DMA at the end
        of the program), since an input and an output cannot be the same NEFF variable: the returned outputs with
        inputs replaced by their copies, the copies of written inputs not returned, and the (input, output) pairs."""
        returned = [p for p in self._params if any(o is p for o in outputs)]
        if self.grid > 1:
            # Programs run concurrently and do not synchronise, so no program's copy would be ordered after the
            # others' writes. Every program writes the one shared input buffer instead, and the runner reads each
            # written or returned input's final contents after all programs have finished: the pair (input, input).
            return outputs, [], tuple((p.name, p.name) for p in self._params if p.written)
        params = [p for p in self._params if p.written or any(r is p for r in returned)]
        if not params:
            return outputs, [], ()
        copies: dict[int, Storage] = {}
        for p in params:
            copy = self.allocate(p.shape, p.dtype, BUFFERS["shared_hbm"], f"{p.name}_out", None)
            dma_copy.__nki_impl__(self, dst=copy, src=NkiTensor(p, 0, contiguous_pairs(p.shape)))
            copies[id(p)] = copy.storage
        returned = [copies.get(id(o), o) for o in outputs]
        hidden = [c for c in copies.values() if not any(c is r for r in returned)]
        return returned, hidden, tuple((p.name, copies[id(p)].name) for p in params if p.written)

    def _arg(self, name: str, value: Any) -> Any:
        if not isinstance(value, (np.ndarray, TensorSpec)):
            return value
        shape, dtype = tuple(int(d) for d in value.shape), _array_dtype(name, value)
        code = self.kernel.func.__code__
        check_hbm_size(shape, dtype, self.options.target, f"kernel argument '{name}'",
                       (code.co_filename, code.co_firstlineno))  # fmt: skip
        self._names.add(name)
        handle = self.emitter.param(name, shape, dtype)
        # An input reports the buffer NKI gives kernel arguments, nl.hbm (the docs' mxfp kernels assert it); in the IR
        # it is a shared_hbm argument of the kernel, as every input is.
        storage = Storage(name, shape, dtype, BUFFERS["hbm"], None, handle, self._owner,
                          (code.co_filename, code.co_firstlineno, 0), is_param=True)  # fmt: skip
        self._params.append(storage)
        return NkiTensor(storage, 0, contiguous_pairs(shape))

    def _outputs(self, result: Any) -> tuple[list[Storage], bool]:
        self._returned_shapes: list[tuple[int, ...]] = []
        if result is None:
            return [], False
        is_tuple = isinstance(result, (tuple, list))
        storages, shapes = [], []
        code = self.kernel.func.__code__
        frame, self._kernel_frame = self._kernel_frame, None
        line = frame.f_lineno if frame is not None else _return_line(code.co_filename, code.co_firstlineno)
        returned_at = (code.co_filename, line)
        for t in result if is_tuple else [result]:
            if not isinstance(t, NkiTensor):
                raise NkiError(
                    f"kernel '{self.kernel.name}' returned a {type(t).__name__}",
                    "return a shared_hbm tensor or a tuple of them",
                    where=returned_at,
                )
            self._check_scope(t.storage)
            if t.on_chip and RETURN_ON_CHIP is not None:
                t = RETURN_ON_CHIP(self, self.kernel, t) or t
            if t.buffer != "shared_hbm" and not t.storage.is_param:  # returning an input is aliasing
                file, line = t.storage.loc[:2]
                raise NkiError(
                    "The input and output tensor of a NKI kernel must be in shared_hbm address space",
                    f"'{t.label}' is in {t.buffer}; allocate outputs with buffer=nl.shared_hbm "
                    f"(note: '{t.label}' is allocated at {file}:{line}"
                    + ("; nl.hbm was the output buffer of NKI 0.2, in 0.3 it is private HBM)" if t.buffer == "hbm"
                       else ")"),
                    where=returned_at,
                )
            if t.storage.name in self._constants:
                raise NkiError(f"kernel '{self.kernel.name}' returns the constant '{t.name}'",
                               "copy it into an output tensor", where=t.storage.loc[:2])  # fmt: skip
            whole = not isinstance(t.offset, IndexExpr) and t.offset == 0 and t.dtype == t.storage.dtype
            # t.reshape(...) of a whole HBM tensor is the same bytes under another shape: returned as that shape.
            dense = t.pairs == contiguous_pairs(t.shape) and math.prod(t.shape) == math.prod(t.storage.shape)
            if not whole or not dense:
                raise NkiError(f"kernel '{self.kernel.name}' must return whole tensors, not views of '{t.name}'")
            storages.append(t.storage)
            shapes.append(tuple(t.shape))
        self._returned_shapes = shapes
        return storages, is_tuple

    # -- TraceContext.call: trace-vs-concrete dispatch --------------------------------------------------
    def call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if is_nki_op(func):
            impl = func.__nki_impl__  # type: ignore[attr-defined]
            self._check_call(func, impl, args, kwargs)
            if func.__module__ == _ISA_MODULE and _has_empty_tensor(args, kwargs):
                return None  # an instruction on a zero-size view (x[0:0], nl.ds(i, 0)) does nothing: record nothing
            first = len(self._emitted)
            outer = self._api_call
            if not outer:
                self._api_call = _api_name(func)
            try:
                result = impl(self, *args, **kwargs)
            finally:
                self._api_call = outer
            if result is None and func.__module__ == _ISA_MODULE and len(self._emitted) > first:
                return self._handle(func.__name__, first)
            return result
        if getattr(func, "__nki_dont_trace__", False):
            return self._call_concrete(func, args, kwargs)
        if getattr(func, "__nki_kernel__", False):  # a nested @nki.jit Kernel (tracer.py)
            return self._inline(func.func, args, kwargs)
        module = inspect.getmodule(func)
        if module is not None and _excluded(module.__name__):
            return func(*args, **kwargs)
        return self._inline(func, args, kwargs)

    def _check_call(self, func: Any, impl: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        binder = _BINDERS.get(impl)
        if binder is None:
            binder = _BINDERS[impl] = _binder(inspect.signature(impl))
        try:
            binder(self, *args, **kwargs)  # Python's own binding: the same rules as Signature.bind, ~20x cheaper
        except TypeError:
            # The message is inspect's, as it always was (the fast binder only decides that the call is bad).
            try:
                inspect.signature(impl).bind(self, *args, **kwargs)
            except TypeError as e:
                raise NkiError(f"bad call of {func.__module__.rsplit('.', 1)[-1]}.{func.__name__}: {e}",
                               keyword_hint(impl, kwargs)) from None  # fmt: skip  # a misspelt keyword: name it

    def _call_concrete(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = _concretize(args), _concretize(kwargs)
        self.concrete_depth += 1
        try:
            return func(*args, **kwargs)
        finally:
            self.concrete_depth -= 1

    def _inline(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        result = func(*args, **kwargs)
        if not has_nki_data((args, kwargs)) and has_nki_data(result):
            raise NkiError(
                "function without nki data as input should not return nki data",
                f"'{getattr(func, '__name__', func)}' must receive the tensors it returns (e.g. pass the output)",
            )
        return result

    # -- allocation -------------------------------------------------------------------------------------
    def allocate(self, shape: Any, dtype: Any, buffer: Any, name: str, address: Any, whole: bool = True) -> NkiTensor:
        """A new tensor. ``whole=False``: an on-chip block tensor's layout, which need not fit as a whole."""
        self._note_kernel_frame()
        blocks = split_par_dim(shape)  # legacy (B, nl.par_dim(P), F): B blocks of (P, F) tiles
        dims = _shape(shape)
        dtype, buf = normalize_dtype(dtype), normalize_buffer(buffer)
        if blocks and buf.on_chip:
            # The device compiler allocates the blocks that are live, not the declaration (passes/split_blocks.py):
            # one block must fit here; the live blocks together are allocate-memory's to place.
            _check_on_chip_shape(dims[blocks:], dtype, buf.name, self.options.target)
            tensor = self.allocate(block_layout(dims, blocks), dtype, buf, name, address, whole=False)
            self.peak_live.blocked.add(tensor.storage.name)
            return block_view(tensor, dims, blocks)
        if buf.on_chip and whole:
            _check_on_chip_shape(dims, dtype, buf.name, self.options.target)
        else:
            check_hbm_size(dims, dtype, self.options.target, "HBM tensor")
        addr = _address(address)
        loc = user_location()
        label = name or assigned_name(user_frame())  # for messages: 'acc', not 'sbuf_1'
        buf = era02.hbm_output(self.kernel.func, buf)  # NKI 0.2: a returned nl.hbm tensor is the kernel's output
        if buf.name == "shared_hbm":
            name = self._shared_name(name, dims, dtype)
        else:
            name = self._unique(name or buf.name)
        handle = self.emitter.alloc(name, dims, dtype, buf.name, addr, Loc(*loc))
        storage = Storage(name, dims, dtype, buf, addr, handle, self._owner, loc, scope=tuple(self.loops),
                          label=label)
        if buf.name == "shared_hbm" and self._pid == 0:
            self._shared.append(storage)
        self.loop_tiles.allocated(storage)
        return NkiTensor(storage, 0, contiguous_pairs(dims))

    def constant(self, values: np.ndarray) -> NkiTensor:
        """An HBM tensor holding ``values`` (``nl.shared_constant``), embedded in the NEFF. It is named after its
        contents, so every SPMD program names the same tensor (one NEFF variable both cores share), and the same
        contents twice in one program are one tensor."""
        dims, dtype = _shape(values.shape), normalize_dtype(values.dtype)
        data = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<"), copy=False).tobytes()
        name = f"const_{hashlib.sha256(dtype.encode() + repr(dims).encode() + data).hexdigest()[:12]}"
        storage = self._constants.get(name)
        if storage is None:
            self._names.add(name)
            loc = user_location()
            handle = self.emitter.alloc(name, dims, dtype, "shared_hbm", None, Loc(*loc), data)
            buf = normalize_buffer("shared_hbm")
            storage = Storage(name, dims, dtype, buf, None, handle, self._owner, loc, scope=())
            self._constants[name] = storage
        return NkiTensor(storage, 0, contiguous_pairs(dims))

    def _shared_name(self, name: str, dims: tuple[int, ...], dtype: str) -> str:
        """The k-th shared_hbm allocation of every SPMD program is one tensor: reuse program 0's name."""
        k, self._shared_seen = self._shared_seen, self._shared_seen + 1
        if self._pid == 0 or k >= len(self._shared):
            return self._unique(name or "out")
        first = self._shared[k]
        if (first.shape, first.dtype) != (dims, dtype):
            raise NkiError(
                f"shared_hbm tensor #{k} is {dims} {dtype} in program {self._pid} but {first.shape} {first.dtype} "
                "in program 0",
                "SPMD programs share their shared_hbm outputs and must allocate them identically",
            )
        return first.name

    def _unique(self, base: str) -> str:
        """``base`` (made a safe NEFF name: user-given names may hold '/', spaces, ...; target/names.py), else
        ``base_<k>`` with the smallest free k. Names are never released within a program, so every suffix below the
        one last handed out for ``base`` is still taken: the search resumes there (O(1) amortised instead of
        rescanning from 1 on every allocation of a loop body's tensor)."""
        base = safe_name(base)
        k = self._next_suffix.get(base, 0)
        name = f"{base}_{k}" if k else base
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._next_suffix[base] = k
        self._names.add(name)
        return name

    # -- instructions -----------------------------------------------------------------------------------
    def _note_kernel_frame(self) -> None:
        """Keep the kernel function's frame (once per program): after the call returns, its ``f_lineno`` is the line
        of the ``return`` that ran, which errors about the returned value name."""
        if self._kernel_frame is not None:
            return
        code, frame = self.kernel.func.__code__, sys._getframe(1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        self._kernel_frame = frame

    def inst(self, op: str, operands: dict[str, NkiTensor], attrs: dict[str, Any]) -> None:
        self._note_kernel_frame()
        self.instructions += 1
        if self.instructions > self.max_instructions:
            raise NkiError(f"kernel '{self.kernel.name}' traces more than {self.max_instructions} instructions",
                           f"use fewer instructions, or raise the limit with {INSTRUCTIONS_VAR}=N")  # fmt: skip
        loc = Loc(*user_location(), call=pinned_call(self._api_call))
        emitted = {role: self._operand(role, t) for role, t in operands.items()}
        writes = _write_roles(op)
        for role, t in operands.items():
            if role not in writes and not t.storage.written and t.buffer in ("sbuf", "psum"):
                _warn_unwritten(op, role, t, loc)
        for role, t in operands.items():
            if role in writes:
                t.storage.written = True
            self.loop_tiles.accessed(t.storage, role in writes, (loc.file, loc.line))
        self._emitted.append(self.emitter.inst(op, emitted, attrs, loc))
        self._last_loc = loc
        self.peak_live.note(op, [t.storage for t in operands.values()], loc)

    def last_traced(self) -> Any:
        """The instruction traced last (None before the first)."""
        return self._emitted[-1] if self._emitted else None

    def replace_traced(self, old: Any) -> None:
        """The instruction traced last replaces ``old``, the one traced just before it: ``old`` leaves the IR and
        the count, and the last takes its place in the trace order (``psum += matmul``, recorders/psum_accumulate.py)."""
        assert len(self._emitted) > 1 and self._emitted[-2] is old
        self._emitted[-2] = self._emitted.pop()
        self.instructions -= 1
        old.detach()
        old.erase()

    def _handle(self, name: str, first: int) -> NkiInstruction:
        """The NkiInstruction of a nisa call that traced the instructions from ``first`` on (its file:line names it
        in errors: the user's line its last instruction recorded, which is the call's, as only nkic's frontend runs
        between the call and its instructions)."""
        loc = self._last_loc
        assert loc is not None
        return NkiInstruction(self, self._emitted[first:], len(self._emitted), tuple(self.dynamic_loops),
                              (name, loc.file, loc.line))  # fmt: skip

    def _operand(self, role: str, t: NkiTensor) -> Operand:
        if t.storage.owner is not self._owner:
            raise NkiError(f"tensor '{t.label}' belongs to another trace or SPMD program", "do not cache tensors")
        self._check_scope(t.storage)
        problem = t.bounds_problem()
        if problem is not None:
            raise NkiError(f"'{role}': {problem}")
        view = t.dtype if t.dtype != t.storage.dtype else ""  # view(dtype) / ap(dtype=): same bytes, other dtype
        dyn = t.dyn.term(f"{role}_offset") if t.dyn is not None else ("", "", 0, 0)
        return Operand(t.storage.handle, self.affine(t.offset), t.pairs or ((1, 1),), view, dyn)

    def _check_scope(self, storage: Storage) -> None:
        """A tensor allocated in a symbolic loop body and used after that loop ended (a tile appended to a list in
        the loop, used later) is one tensor per iteration: those loops must unroll, so that each iteration's tensor
        exists."""
        closed = [v for v in storage.scope if not any(v is open_ for open_ in self.loops)]
        if closed:
            raise NeedsUnroll(v.site for v in closed)

    def affine(self, value: IndexExpr | int) -> Affine:
        if not isinstance(value, IndexExpr):
            return Affine(int(value))
        coeffs = [0] * len(self.loops)
        for var, c in value.terms:
            depth = next((d for d, v in enumerate(self.loops) if v is var), None)
            if depth is None:
                raise NkiError(f"loop variable {var.name} is used outside its loop")
            coeffs[depth] += c
        while coeffs and coeffs[-1] == 0:
            coeffs.pop()
        return Affine(value.const, tuple(coeffs))

    # -- loops ------------------------------------------------------------------------------------------
    def loop(self, kind: str, start: Any, stop: Any, step: Any) -> Any:
        if stop is None:
            start, stop = 0, start
        start, stop, step = (_loop_bound(v) for v in (start, stop, step))
        if step == 0:
            raise NkiError("loop step cannot be zero")
        trips, limit = len(range(start, stop, step)), max_trip_count()
        if trips > limit:
            hint = f"tile the work with fewer iterations, or raise the limit with {TRIP_COUNT_VAR}=N"
            raise NkiError(f"loop of {trips} iterations is over the limit of {limit}", hint)
        if kind == "static" or self.concrete_depth:
            return range(start, stop, step)
        file, line, col = user_location()
        occurrence = self._site_counts.get((file, line), 0)
        self._site_counts[(file, line)] = occurrence + 1
        site = (file, line, occurrence)
        if site in self.unrolled or (file, line, -1) in self.unrolled or not range(start, stop, step):
            return self.loop_tiles.unrolled(range(start, stop, step), f"{kind}_range", file, line)
        return self._symbolic_loop(kind, start, stop, step, site, Loc(file, line, col))

    def _symbolic_loop(self, kind: str, start: int, stop: int, step: int, site: Any, loc: Loc) -> Iterator[Any]:
        """Yield the LoopVar once; the body between begin_loop/end_loop is traced a single time."""
        var = LoopVar(site, start, stop, step, self)
        self.rolled_sites.add(site)
        self.emitter.begin_loop(kind, start, stop, step, loc)
        self.loops.append(var)
        finished = False
        try:
            yield var
            finished = True
            # Resumed by the user's `for` for a second iteration: sys._getframe(1) is the frame running the loop.
            if self.live and _carries_loop_tensor(var, sys._getframe(1), loc):
                self.pending_unroll.add(site)
        finally:
            if self.live:  # a dead context belongs to an abandoned attempt: leave it alone
                if not finished:
                    # `break` out of a symbolic loop: the body's control flow depends on the iteration.
                    self.pending_unroll.add(site)
                del self.loops[next(d for d, v in enumerate(self.loops) if v is var)]  # `is`: == needs values
                self.emitter.end_loop()

    # -- SPMD ------------------------------------------------------------------------------------------
    def program_id(self, axis: Any) -> int:
        """The index along ``axis`` of the program being traced; programs run in row-major grid order."""
        ax = self._axis(axis, "program_id")
        if not self.grid_shape:
            return 0
        index = self._pid
        for a in range(len(self.grid_shape) - 1, ax, -1):
            index //= self.grid_shape[a]
        return index % self.grid_shape[ax]

    @property
    def program_rank(self) -> int:
        """The row-major index of the program being traced in its launch: its core's rank (sendrecv, core_barrier)."""
        return self._pid

    def num_programs(self, axes: Any) -> int:
        """Programs along ``axes`` (an axis or a tuple of them); ``None`` is the whole grid."""
        if axes is None:
            return self.grid
        if isinstance(axes, (tuple, list)):
            return math.prod(self.num_programs(a) for a in axes)
        ax = self._axis(axes, "num_programs")
        return self.grid_shape[ax] if self.grid_shape else 1

    def program_ndim(self) -> int:
        return len(self.grid_shape)

    def _axis(self, axis: Any, what: str) -> int:
        ax = operator.index(axis)
        ndim = max(1, len(self.grid_shape))  # without a grid, axis 0 has one program
        if not 0 <= ax < ndim:
            raise NkiError(f"{what} axis {axis} does not exist", f"the launch grid has {len(self.grid_shape)} axes")
        return ax


@functools.lru_cache(maxsize=1024)
def _return_line(file: str, def_line: int) -> int:
    """The line of the kernel's ``return`` (the function defined at ``file:def_line``): its only return statement,
    else the last one (an error about what a kernel returns names it); the ``def`` line if none is found."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return def_line
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and min([n.lineno, *(d.lineno for d in n.decorator_list)]) <= def_line <= n.lineno), None)  # fmt: skip
    if fn is None:
        return def_line
    returns, todo = [], list(fn.body)
    while todo:  # the function's own returns, not those of functions or lambdas nested in it
        node = todo.pop()
        if isinstance(node, ast.Return):
            returns.append(node.lineno)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return max(returns, default=def_line)


# ------------------------------------------------------------------------------------------------------------
# iteration-carried Python state of a rolled loop
# ------------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _carried_names(file: str, line: int) -> frozenset[str]:
    """Names the body of the ``for`` at ``file:line`` reads before it assigns them (in source order, a line's reads
    before its stores): the Python variables one iteration hands to the next (``prev = t`` after ``use(prev)``)."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return frozenset()
    loop = next((n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == line), None)
    if loop is None:
        return frozenset()
    names = sorted(
        (n for stmt in loop.body for n in ast.walk(stmt) if isinstance(n, ast.Name)),
        key=lambda n: (n.lineno, isinstance(n.ctx, ast.Store), n.col_offset),
    )
    first: dict[str, bool] = {}  # name -> first occurrence is a read
    stored: set[str] = set()
    for n in names:
        first.setdefault(n.id, isinstance(n.ctx, ast.Load))
        if isinstance(n.ctx, ast.Store):
            stored.add(n.id)
    return frozenset(name for name, read in first.items() if read and name in stored)


def _carries_loop_tensor(var: LoopVar, frame: Any, loc: Loc) -> bool:
    """True if, after the one traced iteration, a carried variable holds a tensor allocated in this loop's body:
    the next iteration would read it, which a loop traced once cannot express, so the loop must unroll."""
    names = _carried_names(loc.file, loc.line)
    if not names:
        return False
    values = frame.f_locals
    return any(_holds_scoped(values.get(name), var, 0) for name in names)


def _holds_scoped(value: Any, var: LoopVar, depth: int) -> bool:
    if isinstance(value, NkiTensor):
        return any(v is var for v in value.storage.scope)
    if depth < 2 and isinstance(value, (list, tuple)):
        return any(_holds_scoped(v, var, depth + 1) for v in value)
    if depth < 2 and isinstance(value, dict):
        return any(_holds_scoped(v, var, depth + 1) for v in value.values())
    return False


# ------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _write_roles(op: str) -> frozenset[str]:
    """The roles instruction ``op`` writes (looked up for every operand of every traced instruction)."""
    return frozenset(r.name for r in INSTRUCTIONS[op].roles if r.write)


# nki op implementation -> a no-op function with its parameter list (see _binder)
_BINDERS: dict[Any, Callable[..., None]] = {}


def _binder(sig: inspect.Signature) -> Callable[..., None]:
    """A function that does nothing, with ``sig``'s parameters (names, kinds, which have defaults): calling it
    raises TypeError exactly when ``sig.bind`` would, with the interpreter's argument binding instead of
    ``Signature.bind``'s Python loop, which was ~10% of a large trace (every nki call is checked before it runs)."""
    parts: list[str] = []
    kinds = inspect.Parameter
    positional_only = star = False
    for p in sig.parameters.values():
        if p.kind is not kinds.POSITIONAL_ONLY and positional_only:
            parts.append("/")
            positional_only = False
        if p.kind is kinds.POSITIONAL_ONLY:
            positional_only = True
        if p.kind is kinds.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star = True
        elif p.kind is kinds.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            if p.kind is kinds.KEYWORD_ONLY and not star:
                parts.append("*")
                star = True
            parts.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}=None")
    if positional_only:
        parts.append("/")
    namespace: dict[str, Any] = {}
    exec(f"def bind({', '.join(parts)}):\n    pass\n", namespace)  # noqa: S102 -- names come from a signature
    return namespace["bind"]  # type: ignore[no-any-return]


_EXCLUDED = ("nkic.frontend", "numpy", "math", "ml_dtypes")


def _excluded(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in _EXCLUDED)


_API_PREFIX = {"isa": "nisa", "language": "nl", "collectives": "ncc"}


_API_NAMES: dict[Any, str] = {}  # nki API function -> _api_name (asked on every outermost nki call)


def _api_name(func: Any) -> str:
    """``nl.exp``, ``nisa.activation``: the name the user called an nki API function by."""
    name = _API_NAMES.get(func)
    if name is None:
        module = func.__module__.rsplit(".", 1)[-1]
        name = _API_NAMES[func] = f"{_API_PREFIX.get(module, module)}.{func.__name__}"
    return name


_ISA_MODULE = PUBLIC_MODULE  # the nisa instructions' module, as their __module__ says (recorders/__init__.py)


def _has_empty_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return any(isinstance(v, NkiTensor) and 0 in v.shape for v in (*args, *kwargs.values()))  # size 0, no product


def has_nki_data(value: Any, _depth: int = 0) -> bool:
    """True if ``value`` (recursively through containers and NKIObjects) holds a tensor."""
    if isinstance(value, NkiTensor):
        return True
    if _depth > 8:
        return False
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(has_nki_data(v, _depth + 1) for v in value)
    if isinstance(value, dict):
        return any(has_nki_data(v, _depth + 1) for v in value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(has_nki_data(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value))
    return False


def _concretize(value: Any) -> Any:
    """Loop-variable expressions -> ints (their loops unroll); containers are rebuilt."""
    if isinstance(value, IndexExpr):
        return int(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_concretize(v) for v in value)
    if isinstance(value, dict):
        return {k: _concretize(v) for k, v in value.items()}
    return value


def _loop_bound(value: Any) -> int:
    if isinstance(value, IndexExpr):
        return int(value)  # an outer loop's variable as a bound: unroll that loop
    try:
        return operator.index(value)
    except TypeError:
        raise NkiError(f"loop bounds must be int, got {type(value).__name__} {value!r}") from None


def _shape(shape: Any) -> tuple[int, ...]:
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in dims:
        if isinstance(d, IndexExpr):
            d = int(d)
        try:
            d = operator.index(d)
        except TypeError:
            raise NkiError(f"tensor shape entries must be int, got {type(d).__name__}") from None
        if d <= 0:
            raise NkiError(f"tensor shape {tuple(dims)} has a non-positive dimension")
        out.append(d)
    return tuple(out)


def _check_on_chip_shape(dims: tuple[int, ...], dtype: str, buffer: str, target: str) -> None:
    if not dims:
        raise NkiError(f"a {buffer} tensor needs at least a partition dimension")
    t = get_target(target)
    if dims[0] > t.num_partitions:
        raise NkiError(
            f"Size of partition dimension {dims[0]} exceeds architecture limitation of {t.num_partitions}",
            f"the first dim of an SBUF/PSUM tensor is the partition dim; tile it to at most {t.num_partitions}",
        )
    row = itemsize(dtype)
    for d in dims[1:]:
        row *= d
    limit = t.psum_bytes_per_partition if buffer == "psum" else t.sbuf_bytes_per_partition
    if row > limit:
        raise NkiError(f"{buffer} tensor needs {row} bytes per partition, {buffer} has {limit}")


def check_hbm_size(dims: tuple[int, ...], dtype: str, target: str, what: str, where: Any = None) -> None:
    """An HBM tensor must fit the target's HBM (checked before any work depends on its size)."""
    size, limit = math.prod(dims) * itemsize(dtype), get_target(target).hbm_bytes
    if size > limit:
        raise NkiError(f"{what} {dtype}{list(dims)} needs {size} bytes, more than the {limit} bytes of HBM "
                       f"of a {get_target(target).name} NeuronCore", where=where)  # fmt: skip


def _address(address: Any) -> tuple[int, int] | None:
    if address is None:
        return None
    try:
        p, b = address
        return (operator.index(p), operator.index(b))
    except (TypeError, ValueError):
        raise NkiError(f"address must be a (partition, byte_offset) pair, got {address!r}") from None


# One warning per (message, line) for the whole process, as Python's "default" action does (a kernel re-traced to
# unroll a loop, or compiled again, would otherwise repeat it).
_WARNED: dict[Any, Any] = {}


def _warn_unwritten(op: str, role: str, t: NkiTensor, loc: Loc) -> None:
    """An on-chip tensor read before any instruction wrote it: its contents are whatever the memory held (the
    simulator's NaN fill), so the result is garbage. A compile-time warning at the reading instruction's line; a
    tensor written only in part is not detected (the tracer tracks whole allocations)."""
    alloc = f"{os.path.basename(t.storage.loc[0])}:{t.storage.loc[1]}"
    text = (f"{op} reads '{role}' from {t.buffer} tensor '{t.label}' (allocated at {alloc}) before any "
            "instruction writes it")  # fmt: skip
    warnings.warn_explicit(text, NkiWarning, loc.file, loc.line, registry=_WARNED)
