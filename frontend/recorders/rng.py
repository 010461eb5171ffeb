"""Random numbers (XORWOW inside VectorE / GpSimd: ``runtime/rng.py``): ``rng``, ``rand2``, ``dropout`` and the
state instructions."""

from __future__ import annotations

from typing import Any

from nkic.frontend.affine import is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.enums import _ENGINE
from nkic.frontend.recorders.record import (
    _api_rules,
    _elementwise,
    _enum,
    _mask,
    _on_chip,
    _record,
    _rules,
    _scalar,
    _target,
    _tensor,
)
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import INSTRUCTIONS
from nkic.target.machine import ENGINE_OF_HINT


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
