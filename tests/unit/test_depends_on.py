"""``nisa.NkiInstruction`` and ``depends_on``: every nisa call returns a handle; an explicit edge orders two
instructions the data does not (observable in the simulator's timeline), survives symbolic-loop unrolling (each
iteration's consumer waits for the same iteration's producer), and bad edges are errors at the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_traced, run_neff  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from kernel_harness import load as _load, store as _store  # noqa: E402


@nki.jit
def two_engines(a, b, dep):
    """exp(a) on ACT and 2 * b on DVE: independent data, so they overlap unless ordered."""
    ta, tb = _load(a), _load(b)
    ra = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    rb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    x = nisa.activation(dst=ra, op=nl.exp, data=ta)
    y = nisa.tensor_scalar(dst=rb, data=tb, op0=nl.multiply, operand0=2.0)
    if dep:
        assert y.depends_on(x) is y
    return _store(ra), _store(rb)


def _events(kernel, *args, **inputs):
    res = run_neff(compile_traced(kernel.trace(*args)).neff, inputs)
    return res, {m: [e for e in res.profile.events if e.mnemonic == m] for m in ("ACTIVATE", "TENSOR_SCALAR")}


def test_an_edge_orders_what_data_does_not() -> None:
    a = np.linspace(-1, 1, 128 * 512, dtype=np.float32).reshape(128, 512)
    b = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    _, free = _events(two_engines, a, b, False, a=a, b=b)
    assert free["TENSOR_SCALAR"][0].start_ns < free["ACTIVATE"][0].end_ns  # without the edge they overlap
    _, ordered = _events(two_engines, a, b, True, a=a, b=b)
    assert ordered["TENSOR_SCALAR"][0].start_ns >= ordered["ACTIVATE"][0].end_ns
    got_a, got_b = two_engines(a, b, True)
    np.testing.assert_allclose(got_a, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(got_b, 2 * b)


def test_every_nisa_call_returns_a_handle_and_edges_compose() -> None:
    seen = []

    @nki.jit
    def kernel(a, chained):
        t = _load(a)
        r = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf) for _ in range(3)]
        x = nisa.activation(dst=r[0], op=nl.exp, data=t)
        y = nisa.tensor_scalar(dst=r[1], data=t, op0=nl.add, operand0=1.0)
        z = nisa.tensor_copy(dst=r[2], src=t)
        seen.extend([x, y, z])
        if chained:
            z.depends_on(y).depends_on(x)
        else:
            z.depends_on(y, x)
        return _store(r[2])

    a = np.ones((128, 64), np.float32)
    texts = [str(kernel.trace(a, c).module) for c in (True, False)]
    assert all(isinstance(h, nisa.NkiInstruction) for h in seen)
    assert texts[0] == texts[1] and 'after = ["kernel.i' in texts[0] and texts[0].count("tag = ") == 2


@nki.jit
def looped(a, b, dep):
    """Each iteration: a long ACT (exp of 1024 columns of a) and a short DVE op (3 x 8 columns of b), independent."""
    ta, tb = _load(a), _load(b)
    ra = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    rb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        x = nisa.activation(dst=ra[:, nl.ds(i * 1024, 1024)], op=nl.exp, data=ta[:, nl.ds(i * 1024, 1024)])
        y = nisa.tensor_scalar(dst=rb[:, nl.ds(i * 8, 8)], data=tb[:, nl.ds(i * 8, 8)], op0=nl.multiply,
                               operand0=3.0)  # fmt: skip
        if dep:
            y.depends_on(x)
    return _store(ra), _store(rb)


def test_edges_inside_a_symbolic_loop_pair_each_iteration() -> None:
    """The loop stays symbolic through tracing (one penguin instruction each) and is unrolled in BIR: iteration i's
    DVE op waits for iteration i's ACT, not for a later one's."""
    a, b = np.zeros((128, 3072), np.float32), np.ones((128, 24), np.float32)
    assert 'penguin.loop "affine"' in str(looped.trace(a, b, True).module)
    for dep in (False, True):
        _, ev = _events(looped, a, b, dep, a=a, b=b)
        acts, dves = (sorted(ev[m], key=lambda e: e.start_ns) for m in ("ACTIVATE", "TENSOR_SCALAR"))
        assert len(acts) == len(dves) == 3
        if not dep:  # nothing orders them: every DVE op is done before the last ACT ends
            assert all(y.end_ns < acts[-1].end_ns for y in dves)
            continue
        for x, y in zip(acts, dves):
            assert y.start_ns >= x.end_ns
        assert dves[0].start_ns < acts[1].end_ns  # paired with its own iteration's ACT only
    got_a, got_b = looped(a, b, True)
    np.testing.assert_array_equal(got_b, 3 * b)
    np.testing.assert_allclose(got_a, np.ones_like(a))


def _error_cases():
    def later(t, r):
        x = nisa.tensor_copy(dst=r[0], src=t)
        y = nisa.tensor_copy(dst=r[1], src=t)
        x.depends_on(y)

    def itself(t, r):
        x = nisa.tensor_copy(dst=r[0], src=t)
        x.depends_on(x)

    def not_an_instruction(t, r):
        x = nisa.tensor_copy(dst=r[0], src=t)
        x.depends_on(t)

    def out_of_a_dynamic_loop(t, r):
        inner = []
        nl.fori_loop(0, 2, lambda i: inner.append(nisa.tensor_copy(dst=r[0], src=t)))
        y = nisa.tensor_copy(dst=r[1], src=t)
        y.depends_on(inner[0])

    return [
        (later, "is traced after"), (itself, "cannot depend on itself"),
        (not_an_instruction, "depends_on takes instructions"), (out_of_a_dynamic_loop, "inside a dynamic loop"),
    ]  # fmt: skip


@pytest.mark.parametrize("body,match", _error_cases(), ids=lambda c: getattr(c, "__name__", ""))
def test_errors_name_the_users_line(body, match: str) -> None:
    @nki.jit
    def kernel(a):
        t = _load(a)
        r = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf) for _ in range(2)]
        body(t, r)
        return _store(r[1])

    with pytest.raises(NkiError, match=match) as e:
        kernel.trace(np.zeros((128, 8), np.float32))
    assert e.value.file == __file__
    lines, first = inspect.getsourcelines(body)
    assert first < e.value.line < first + len(lines)
