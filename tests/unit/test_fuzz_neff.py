"""NEFF mutation fuzzing (issue 12, item 7): seeded, bounded, hypothesis-based.

A real compiled kernel's NEFF is mutated at every layer -- the header, the gzip stream, the tar members, the JSON
fields, and the engine binaries re-signed into a consistent NEFF so that they reach the simulator. Every mutant must
give ``NeffFormatError`` (the reader) or run / give ``SimulationError`` (the simulator): never another exception, a
hang or an unbounded allocation.

The quick profile runs in ``make test`` (a few seconds); ``NKIC_FUZZ=long`` (``make fuzz``) runs the long one, whose
counts are recorded in ``bench/README.md``. ``NKIC_FUZZ_EXAMPLES=N`` overrides the examples per layer.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import struct
import tarfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from time_limits import Hang, time_limit
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.compiler.driver import compile_traced
from nkic.frontend.tracer import TensorSpec, jit
from nkic.runtime.encoding import decode_stream, encode_stream
from nkic.runtime.errors import SimulationError
from nkic.runtime.neff import ENGINE_MEMBERS, NeffFormatError, read_neff, write_neff
from nkic.runtime.simulator import simulate

LONG = os.environ.get("NKIC_FUZZ") == "long"
EXAMPLES = int(os.environ.get("NKIC_FUZZ_EXAMPLES", 400 if LONG else 25))
SECONDS_PER_MUTANT = 30  # a mutant that takes longer is a hang
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
STATS: dict[str, dict[str, int]] = {}
EXPECTED = np.zeros(0)


def k_fuzz(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.activation(dst=ta, op=nl.exp, data=ta)
    nisa.tensor_tensor(dst=tb, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out, src=tb)
    return out


SHAPE = (128, 32)
INPUTS = {"a": np.linspace(-1, 1, 128 * 32, dtype=np.float32).reshape(SHAPE), "b": np.ones(SHAPE, np.float32)}


@pytest.fixture(scope="module")
def good() -> bytes:
    spec = TensorSpec(SHAPE, "float32")
    data = compile_traced(jit(k_fuzz).trace(spec, spec)).neff
    got = simulate(read_neff(data), INPUTS).outputs
    np.testing.assert_allclose(next(iter(got.values())), np.exp(INPUTS["a"]) + 1, rtol=1e-5)
    global EXPECTED
    EXPECTED = next(iter(got.values()))
    return data


def check(layer: str, data: bytes, run: bool = True, faithful: bool = True) -> str:
    """Read (and, if it reads, simulate) one mutant: the outcome, or an AssertionError for anything unclean. A
    ``faithful`` mutant (damage, not a re-signed new program) that runs must compute what the original does:
    anything else is a silent corruption."""
    stats = STATS.setdefault(layer, {"mutants": 0, "rejected": 0, "simulation errors": 0, "ran": 0})
    stats["mutants"] += 1
    with time_limit(SECONDS_PER_MUTANT, "a mutant"):
        try:
            neff = read_neff(data)
        except NeffFormatError as e:
            assert str(e).startswith("invalid NEFF: ") and "\n" not in str(e), str(e)
            stats["rejected"] += 1
            return "rejected"
        if not run:
            return "read"
        try:
            with np.errstate(all="ignore"):  # a mutant may compute on garbage: values are not the point here
                outputs = simulate(neff, INPUTS, max_events=200_000).outputs
        except SimulationError as e:
            assert str(e), "empty SimulationError"
            stats["simulation errors"] += 1
            return "simulation error"
        except ValueError as e:  # the documented input errors of simulate (a mutant may rename/reshape inputs)
            assert "input" in str(e), f"{type(e).__name__}: {e}"
            stats["rejected"] += 1
            return "input mismatch"
    stats["ran"] += 1
    if faithful:
        got = list(outputs.values())
        assert len(got) == 1 and np.array_equal(got[0], EXPECTED), f"silent corruption in a {layer} mutant"
    return "ran"


def resign(good: bytes, payload: bytes) -> bytes:
    header = bytearray(good[:1024])
    struct.pack_into("<Q", header, 16, len(payload))
    header[172:204] = hashlib.sha256(payload).digest()
    return bytes(header) + payload


def members(good: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(good[1024:]))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]


def pack(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def flips(data: st.DataObject, raw: bytes, lo: int = 0, most: int = 4) -> bytes:
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, most), label="flips")):
        i = data.draw(st.integers(lo, len(out) - 1), label="at")
        out[i] = data.draw(st.sampled_from([out[i] ^ (1 << data.draw(st.integers(0, 7))), 0, 0xFF,
                                            data.draw(st.integers(0, 255))]))  # fmt: skip
    return bytes(out)


# -- the layers ------------------------------------------------------------------------------------------------
@FUZZ
@seed(12)
@given(st.data())
def test_header_mutants(good: bytes, data: st.DataObject) -> None:
    mutant = flips(data, good[:1024]) + good[1024:]
    check("header", mutant)


@FUZZ
@seed(12)
@given(st.data())
def test_gzip_mutants(good: bytes, data: st.DataObject) -> None:
    check("gzip", resign(good, flips(data, good[1024:])))


@FUZZ
@seed(12)
@given(st.data())
def test_tar_mutants(good: bytes, data: st.DataObject) -> None:
    raw = gzip.decompress(good[1024:])
    check("tar", resign(good, gzip.compress(flips(data, raw, most=8), mtime=0)))


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**30]),
                        st.integers(-300, 300), st.floats(allow_nan=False, allow_infinity=False),
                        st.sampled_from(["", "../x", "x" * 300, "sg00", "float32", "hbm", "\0", "q0",
                                         "exp"]))  # fmt: skip
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "size", "shape", "dtype", "var_id", "type", "x"]), inner, max_size=3), max_leaves=6)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@FUZZ
@seed(12)
@given(st.data())
def test_json_field_mutants(good: bytes, data: st.DataObject) -> None:
    entries = members(good)
    name = data.draw(st.sampled_from(sorted(n for n in entries if n.endswith(".json"))), label="member")
    obj = json.loads(entries[name])
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(obj))[1:] or [()]), label="path")
        if not path:
            break
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans(), label="delete") and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_json_values(), label="value")
    entries[name] = json.dumps(obj).encode()
    check("json", resign(good, pack(entries)))


@FUZZ
@seed(12)
@given(st.data())
def test_resigned_binary_mutants(good: bytes, data: st.DataObject) -> None:
    """An engine binary mutated, decoded, and written back as a consistent NEFF (listing regenerated, re-signed): the
    reader accepts what the writer wrote, so the mutant reaches the simulator."""
    neff = read_neff(good)
    sg = neff.subgraphs[0]
    engine = data.draw(st.sampled_from([e for e in ENGINE_MEMBERS if sg.engines[e]]), label="engine")
    raw = encode_stream(engine, sg.engines[engine])
    try:
        _, instrs = decode_stream(flips(data, raw, lo=8, most=3))
    except NeffFormatError:
        STATS.setdefault("binary", {"mutants": 0, "rejected": 0, "simulation errors": 0, "ran": 0})
        STATS["binary"]["mutants"] += 1
        STATS["binary"]["rejected"] += 1
        return
    sg.engines[engine] = instrs
    try:
        mutant = write_neff(neff)
    except (ValueError, KeyError) as e:  # the writer's own validation (e.g. an unknown variable id)
        assert str(e)
        return
    check("binary", mutant, faithful=False)


def test_report_counts() -> None:
    """Print the counts (``make fuzz`` copies them into bench/README.md); all mutants were clean to get here."""
    for layer, stats in sorted(STATS.items()):
        print(f"fuzz {layer}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
