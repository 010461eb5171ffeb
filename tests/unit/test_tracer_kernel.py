"""Kernel objects, the specialization cache, call dispatch, loops, SPMD grids and the nki alias."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.frontend import tracer
from nkic.frontend.emit import Loc, Operand
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, dont_trace, jit


class RecordingEmitter:
    """Records the emitter calls as tuples instead of building IR."""

    def __init__(self, kernel_name: str, grid: int = 1, kind: str = "external"):
        self.calls: list[tuple[Any, ...]] = [("init", kernel_name, grid, kind)]
        RecordingEmitter.last = self

    def begin_program(self, program_id: int) -> None:
        self.calls.append(("program", program_id))

    def param(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        self.calls.append(("param", name, shape, dtype))
        return name

    def alloc(self, name: str, shape: tuple[int, ...], dtype: str, buffer: str, address: Any, loc: Loc) -> str:
        self.calls.append(("alloc", name, shape, dtype, buffer, address))
        return name

    def inst(self, op: str, operands: dict[str, Operand], attrs: dict[str, Any], loc: Loc) -> None:
        self.calls.append(("inst", op, operands, attrs, loc))

    def begin_loop(self, kind: str, start: int, stop: int, step: int, loc: Loc) -> None:
        self.calls.append(("loop", kind, start, stop, step))

    def end_loop(self) -> None:
        self.calls.append(("end_loop",))

    def end_program(self, outputs: list[object]) -> None:
        self.calls.append(("end_program", tuple(outputs)))

    def finish(self, target: str | None = None) -> list[tuple[Any, ...]]:
        return self.calls


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> type[RecordingEmitter]:
    monkeypatch.setattr(tracer, "emitter_factory", RecordingEmitter)
    return RecordingEmitter


def insts(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [c for c in calls if c[0] == "inst"]


A = np.zeros((128, 512), np.float32)


def copy_kernel(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype)
    nisa.dma_copy(t, x)
    nisa.dma_copy(out, t)
    return out


# -- Kernel object and cache --------------------------------------------------------------------------------
def test_kernel_fields_and_options() -> None:
    k = jit(copy_kernel)
    assert isinstance(k, Kernel) and k.func is copy_kernel and list(k.signature.parameters) == ["x"]
    assert k.grid is None and k.options.target == "gen3" and k.options.carrier_format == "bir"
    k2 = k[2]
    assert k2.grid == (2,) and k2.num_programs == 2 and k2.cache is k.cache and k.grid is None
    k3 = jit(mode="simulation")(copy_kernel)
    assert ("mode", "simulation") in k3.options.extra
    assert k[3].grid == (3,) and k[2, 4].num_programs == 8
    for bad in (0, (2, 0), "2", ()):
        with pytest.raises(NkiError, match="unsupported launch grid"):
            k[bad]


def test_compiler_decorators() -> None:
    from nkic.frontend import compiler

    k = compiler.skip_middle_end_transformations(jit(copy_kernel))
    assert k.options.skip_middle_end_transformations
    assert compiler.enable_stack_allocator(log_level=1)(k).options.enable_stack_allocator
    assert compiler.enable_stack_allocator(copy_kernel).options.enable_stack_allocator


def test_trace_result_and_real_ir() -> None:
    traced = jit(copy_kernel).trace(A)
    assert traced.name == "copy_kernel" and traced.grid == 1 and not traced.returns_tuple
    assert traced.inputs == [("x", (128, 512), "float32")]
    assert traced.outputs == [("out", (128, 512), "float32")]
    text = str(traced.module)
    assert 'penguin.alloc "out"' in text and "shared_hbm, 128x512xf32" in text
    assert "penguin.dma_copy dst %sbuf[0 : [512, 128], [1, 512]], src %x_1[0 : [512, 128], [1, 512]]" in text
    assert f'loc = "{__file__}:' in text


def test_cache_does_not_retrace() -> None:
    count = [0]

    @jit
    def k(x, scale):
        count[0] += 1
        return copy_kernel(x)

    t1 = k.trace(A, 2.0)
    t2 = k.trace(np.ones((128, 512), np.float32), 2.0)
    assert t1 is t2 and count[0] == 1
    k.trace(A, 3.0)  # another constant
    k.trace(np.zeros((128, 256), np.float32), 2.0)  # another shape
    k.trace(np.zeros((128, 512), ml_dtypes.bfloat16), 2.0)  # another dtype
    k.trace(TensorSpec((128, 512), "float32"), 2.0)  # same as t1
    assert count[0] == 4
    k[2].trace(A, 2.0)  # another grid: two programs
    assert count[0] == 6


def test_constant_args_and_nkiobject(recording) -> None:
    class Config(nl.NKIObject):
        tile = 128
        scale = 1.0
        name: str = "cfg"

    cfg = Config(tile=64)
    assert cfg.tile == 64 and cfg.scale == 1.0 and cfg.name == "cfg"
    assert Config(tile=64) == cfg

    @jit
    def k(x, config):
        t = nl.ndarray((config.tile, 512), x.dtype)
        nisa.dma_copy(t, x[0 : config.tile])
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, t)
        return out

    assert k.trace(A, Config(tile=64)).outputs == [("out", (64, 512), "float32")]
    assert k.trace(A, Config(tile=64)) is k.trace(A, cfg)


def test_tuple_outputs_and_input_names(recording) -> None:
    @jit
    def k(a, b):
        return copy_kernel(a), copy_kernel(b)

    t = k.trace(A, b=np.zeros((128, 512), np.int32))
    assert t.returns_tuple and [o[0] for o in t.outputs] == ["out", "out_1"]
    assert t.inputs == [("a", (128, 512), "float32"), ("b", (128, 512), "int32")]


# -- call dispatch ------------------------------------------------------------------------------------------
def test_ambient_context_error() -> None:
    with pytest.raises(NkiError, match="nki API called outside of an NKI kernel"):
        nl.ndarray((128, 4), nl.float32)
    with pytest.raises(NkiError, match="nki API called outside of an NKI kernel"):
        nisa.memset(None, 0.0)
    with pytest.raises(NkiError, match="nki API called outside of an NKI kernel"):
        nl.exp(1.0)
    assert nisa.get_nc_version() == nisa.nc_version.gen3


def test_nested_kernel_traces_inline(recording) -> None:
    @jit
    def inner(src, dst):
        nisa.dma_copy(dst, src)

    @jit
    def outer(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        inner(x, out)
        return out

    calls = outer.trace(A).module
    assert [c[1] for c in insts(calls)] == ["dma_copy"]
    assert sum(c[0] == "init" for c in calls) == 1  # one kernel, no separate sub-trace


def test_nested_kernel_without_nki_input_cannot_return_nki_data(recording) -> None:
    @jit
    def make_buffer():
        return nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)

    @jit
    def outer(x):
        out = make_buffer()  # MARK-no-nki-input
        nisa.dma_copy(out, x)
        return out

    with pytest.raises(NkiError, match="function without nki data as input should not return nki data") as e:
        outer.trace(A)
    assert f"{__file__}:{line_of('MARK-no-nki-input')}:" in str(e.value)


def test_dont_trace_runs_concretely(recording) -> None:
    seen: list[object] = []

    @dont_trace
    def helper(i):
        seen.append(i)
        return i * 128

    @jit
    def k(x):
        out = nl.ndarray((256, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((128, 512), x.dtype)
            nisa.dma_copy(t, x)
            row = helper(i)
            nisa.dma_copy(out[row : row + 128], t)
        return out

    calls = k.trace(A).module
    assert not any(c[0] == "loop" for c in calls)  # the helper needed a concrete i: the loop was unrolled
    assert seen[-2:] == [0, 1] and all(isinstance(v, int) for v in seen)
    assert helper.__nki_dont_trace__


def test_user_helpers_and_numpy_are_inlined(recording) -> None:
    def tile(x, i):
        t = nl.ndarray((128, 512), x.dtype)
        nisa.dma_copy(t, x[nl.ds(i * 128, 128)])
        return t

    @jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(int(np.ceil(x.shape[0] / 128))):
            nisa.dma_copy(out[nl.ds(i * 128, 128)], tile(x, i))
        return out

    calls = k.trace(np.zeros((512, 512), np.float32)).module
    assert [c[0] for c in calls].count("loop") == 1
    dma = insts(calls)[0][2]["src"]
    assert dma.offset.const == 0 and dma.offset.coeffs == (128 * 512,)


# -- loops --------------------------------------------------------------------------------------------------
def test_affine_loop_stays_symbolic(recording) -> None:
    count = [0]

    @jit
    def k(x):
        count[0] += 1
        out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            for j in nl.sequential_range(1, 3):
                t = nl.ndarray((128, 128), x.dtype)
                nisa.dma_copy(t, x[:, nl.ds(i * 128, 128)])
                nisa.dma_copy(out[:, i * 128 : i * 128 + 128], t)
        return out

    calls = k.trace(A).module
    assert count[0] == 1
    assert [c for c in calls if c[0] == "loop"] == [("loop", "affine", 0, 4, 1), ("loop", "sequential", 1, 3, 1)]
    op = insts(calls)[0][2]["src"]
    assert op.offset.coeffs == (128,) and op.pattern == ((512, 128), (1, 128))


def test_loop_retraced_unrolled_when_value_needed(recording) -> None:
    count = [0]

    @jit
    def k(x):
        count[0] += 1
        out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.ndarray((128, 128), x.dtype)
            if i == 0:  # needs the concrete value: unroll
                nisa.memset(t, 0.0)
            else:
                nisa.dma_copy(t, x[:, nl.ds(i * 128, 128)])
            nisa.dma_copy(out[:, nl.ds(i * 128, 128)], t)
        for j in nl.affine_range(2):  # this one stays symbolic
            t = nl.ndarray((128, 128), x.dtype)
            nisa.dma_copy(t, x[:, nl.ds(j * 128, 128)])
        return out

    calls = k.trace(A).module
    assert count[0] == 2  # one retrace, invisible to the user
    assert [c for c in calls if c[0] == "loop"] == [("loop", "affine", 0, 2, 1)]
    assert [c[1] for c in insts(calls)][:3] == ["memset", "dma_copy", "dma_copy"]
    assert len(insts(calls)) == 1 + 2 * 3 + 1 + 1


def test_static_range_and_python_range_unroll(recording) -> None:
    @jit
    def k(x):
        out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.static_range(2):
            for j in range(2):
                nisa.dma_copy(out[:, nl.ds((2 * i + j) * 128, 128)], x[:, nl.ds(0, 128)])
        return out

    calls = k.trace(A).module
    assert not any(c[0] == "loop" for c in calls)
    assert [c[2]["dst"].offset.const for c in insts(calls)] == [0, 128, 256, 384]


def test_break_in_symbolic_loop_unrolls(recording) -> None:
    @jit
    def k(x):
        out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            nisa.dma_copy(out[:, nl.ds(i * 128, 128)], x[:, nl.ds(0, 128)])
            break
        return out

    calls = k.trace(A).module
    assert not any(c[0] == "loop" for c in calls) and len(insts(calls)) == 1


def test_nested_loop_unroll_when_outer_value_needed(recording) -> None:
    @jit
    def k(x):
        out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for j in nl.affine_range(range(2, 4)[i]):  # inner bound depends on the outer value
                nisa.dma_copy(out[:, nl.ds(j * 128, 128)], x[:, nl.ds(0, 128)])
        return out

    calls = k.trace(A).module
    assert [c[1:] for c in calls if c[0] == "loop"] == [("affine", 0, 2, 1), ("affine", 0, 3, 1)]


# -- SPMD grid ----------------------------------------------------------------------------------------------
def test_grid_traces_each_program(recording) -> None:
    seen: list[tuple[int, int, int]] = []

    @jit
    def k(x):
        pid = nl.program_id(0)
        seen.append((pid, nl.num_programs(axes=0), nl.program_ndim()))
        out = nl.ndarray((256, 512), x.dtype, buffer=nl.shared_hbm, name="result")
        t = nl.ndarray((128, 512), x.dtype)
        nisa.dma_copy(t, x)
        nisa.dma_copy(out[nl.ds(pid * 128, 128)], t)
        return out

    calls = k[2].trace(A).module
    assert seen == [(0, 2, 1), (1, 2, 1)]
    assert calls[0] == ("init", "k", 2, "external")
    shared = [c for c in calls if c[0] == "alloc" and c[4] == "shared_hbm"]
    assert [c[1] for c in shared] == ["result", "result"]  # one tensor shared by both programs
    assert [c[2]["dst"].offset.const for c in insts(calls) if c[2]["dst"].tensor == "result"] == [0, 128 * 512]
    seen.clear()
    k.trace(A)
    assert seen == [(0, 1, 0)]


def test_grid_real_ir_has_two_programs() -> None:
    text = str(jit(copy_kernel)[2].trace(A).module)
    assert "grid = 2" in text and text.count('penguin.alloc "out"') == 2


# -- alias --------------------------------------------------------------------------------------------------
def test_nki_alias_install() -> None:
    script = (
        "import importlib.util, sys\n"
        "import nkic, nkic.frontend\n"
        "assert importlib.util.find_spec('nki') is None and 'nki' not in sys.modules\n"
        "nkic.install_nki_alias()\n"
        "import nki, nki.language as nl, nki.isa as nisa\n"
        "from nki.isa import reduce_cmd\n"
        "from nki.language import NKIObject\n"
        "import nki.compiler, nki.typing\n"
        "from nki.isa.constants import oob_mode\n"
        "import nkic.frontend.language as L, nkic.frontend.isa as I, nkic.frontend.tracer as T, nkic.api.execute as E\n"
        "assert nl is L and nisa is I and reduce_cmd is I.reduce_cmd and NKIObject is L.NKIObject\n"
        "assert isinstance(nki.jit(lambda a: a), T.Kernel) and nki.simulate is E.simulate\n"
        "assert nki is nkic.api and nki.typing is sys.modules['nki.typing'] and nki.compiler.kernel_format\n"
        "assert str(nl.bfloat16) == 'bfloat16' and str(nl.sbuf) == 'sbuf' and nl.bool == 'bool_'\n"
        "assert nl.tile_size.pmax == 128 and nl.tile_size.psum_fmax == 512 and nl.fp32.min == -3.4028235e38\n"
        "assert str(nl.max) == str(nl.maximum) and str(nl.sum) == 'add' and str(nisa.engine.vector.name) == 'vector'\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def line_of(marker: str) -> int:
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if f"# {marker}" in line:
                return n
    raise AssertionError(marker)


def test_nkiobject_plain_fields_and_stacked_dataclass() -> None:
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Section(nl.NKIObject):
        section_idx = 0
        sizes = [1, 2]
        required: int

        def double(self) -> int:
            return 2 * self.section_idx

    s = Section(section_idx=3, required=1)
    assert s.double() == 6 and s.sizes == [1, 2] and Section(required=1).sizes is not s.sizes
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.section_idx = 4  # type: ignore[misc]

    class Plain(nl.NKIObject):
        a = 1
        b: str

    assert Plain(b="x") == Plain(a=1, b="x")
    unset = Plain()  # NKIObject(**kwargs): a field given no value and without default is left unset
    assert unset.a == 1
    with pytest.raises(AttributeError, match="'b'"):
        _ = unset.b


def test_setitem_and_filled_allocations(recording) -> None:
    @jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.zeros((128, 2, 512), x.dtype)
        tile = nl.ndarray((128, 512), x.dtype)
        tile[...] = x  # HBM -> SBUF: dma_copy
        buf[:, 1, :] = tile  # on chip: tensor_copy
        buf[:, 0] = 2.5  # memset
        out[:, :] = buf[:, 1]
        return out

    calls = k.trace(A).module
    ops = [(c[1], c[3].get("value")) for c in insts(calls)]
    assert ops == [("memset", 0.0), ("dma_copy", None), ("tensor_copy", None), ("memset", 2.5), ("dma_copy", None)]
    assert insts(calls)[2][2]["dst"].offset.const == 512
