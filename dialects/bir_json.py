"""Lossless JSON form of BIR functions and kernel carriers (what FORM B of the IT56 carrier embeds).

Every op becomes ``{"op": name, "props": {...}}`` (plus ``"body"`` for ops with a region). Property values are
tagged only where JSON alone would be ambiguous, so the form stays readable::

    {"op": "bir.activation", "props": {"id": 3, "engine": "act", "func": "exp", "scale": {"f32": 2.0}, ...}}
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    SymbolRefAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, i64_attr, string_attr

FORMAT_VERSION = "nkic-bir-json/1"

_I1 = IntegerType(1)
_OPS: dict[str, type[Operation]] = {op.name: op for op in bir.Bir.operations}


class BirJsonError(ValueError):
    pass


def attr_to_json(a: Attribute) -> Any:
    t = type(a)  # the common exact types first (a FORM B payload has ~10 attributes per instruction)
    if t is StringAttr:
        return a.data  # type: ignore[attr-defined]
    if t is IntegerAttr and a.type is i64:  # type: ignore[attr-defined]
        return a.value.data  # type: ignore[attr-defined]
    if t is ArrayAttr:
        return [attr_to_json(x) for x in a.data]  # type: ignore[attr-defined]
    if t is AccessPatternAttr:
        return _ap_json(a)  # type: ignore[arg-type]
    if isinstance(a, StringAttr):
        return a.data
    if isinstance(a, IntegerAttr):
        if a.type == _I1:
            return bool(a.value.data)
        if a.type == i64:
            return a.value.data
        return {"int": a.value.data, "width": a.type.width.data}  # type: ignore[union-attr]
    if isinstance(a, FloatAttr):
        return {"f32": float(a.value.data)}
    if isinstance(a, DenseArrayBase):
        return {"i64": [int(v) for v in a.get_values()]}
    if isinstance(a, AccessPatternAttr):
        return _ap_json(a)
    if isinstance(a, bir.DepAttr):
        return {"dep": [a.kind.data, a.on.data]}
    if isinstance(a, ArrayAttr):
        return [attr_to_json(x) for x in a.data]
    if isinstance(a, DictionaryAttr):
        return {"dict": {k: attr_to_json(v) for k, v in a.data.items()}}
    if isinstance(a, SymbolRefAttr):
        return {"sym": a.root_reference.data}
    raise BirJsonError(f"attribute {a} has no BIR JSON form")


def _ap_json(a: AccessPatternAttr) -> dict[str, Any]:
    offset, ivs, pairs, view, dyn = a.data
    body = [offset, list(ivs), [list(p) for p in pairs]]
    if dyn[0]:  # [view, [kind, role, register, scale]]
        return {"ap": [*body, view, list(dyn)]}
    return {"ap": body + [view] if view else body}


def attr_from_json(v: Any) -> Attribute:
    if isinstance(v, bool):
        return BoolAttr.from_bool(v)
    if isinstance(v, int):
        return i64_attr(v)  # shared (JSON ints are plain ints, bools handled before)
    if isinstance(v, str):
        return string_attr(v)
    if isinstance(v, list):
        return ArrayAttr([attr_from_json(x) for x in v])
    if isinstance(v, dict) and len(v) >= 1:
        tag = next(iter(v))
        body = v[tag]
        if tag == "f32":
            return FloatAttr(float(body), f32)
        if tag == "int":
            return IntegerAttr(int(body), IntegerType(int(v["width"])))
        if tag == "i64":
            return DenseArrayBase.from_list(i64, [int(x) for x in body])
        if tag == "ap":
            off, ivs, pairs, *rest = body
            view = str(rest[0]) if rest else ""
            dyn = (str(rest[1][0]), str(rest[1][1]), int(rest[1][2]), int(rest[1][3])) if len(rest) > 1 else None
            return AccessPatternAttr(off, pairs, ivs, view, dyn or ("", "", 0, 0))
        if tag == "dep":
            return bir.deps_attr([(str(body[0]), int(body[1]))]).data[0]
        if tag == "dict":
            return DictionaryAttr({k: attr_from_json(x) for k, x in body.items()})
        if tag == "sym":
            return SymbolRefAttr(str(body))
    raise BirJsonError(f"malformed BIR JSON value: {v!r}")


def op_to_json(op: Operation) -> dict[str, Any]:
    if op.name not in _OPS:
        raise BirJsonError(f"'{op.name}' is not a BIR op")
    out: dict[str, Any] = {"op": op.name, "props": {k: attr_to_json(v) for k, v in op.properties.items()}}
    if op.regions:
        out["body"] = [op_to_json(o) for o in op.regions[0].block.ops]
    return out


def op_from_json(d: Any) -> Operation:
    if not isinstance(d, dict) or d.get("op") not in _OPS:
        raise BirJsonError(f"not a BIR op: {str(d)[:80]}")
    cls = _OPS[d["op"]]
    props = {k: attr_from_json(v) for k, v in d.get("props", {}).items()}
    regions = []
    if "body" in d:
        block = Block()
        block.add_ops([op_from_json(o) for o in d["body"]])
        regions.append(Region(block))
    return cls.create(properties=props, regions=regions)


def function_to_json(fn: bir.FunctionOp) -> dict[str, Any]:
    return {"format": FORMAT_VERSION, **op_to_json(fn)}


def function_from_json(d: Any) -> bir.FunctionOp:
    if not isinstance(d, dict) or d.get("format") != FORMAT_VERSION:
        raise BirJsonError(f"expected a {FORMAT_VERSION} document")
    fn = op_from_json(d)
    if not isinstance(fn, bir.FunctionOp):
        raise BirJsonError("the document is not a bir.function")
    return fn


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))  # key order kept: the round trip preserves print order


_enc_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
# json.dumps(value, separators=(",", ":")) through the C encoder directly (no per-call encoder set-up): the same
# scalar encoders, key order kept, NaN allowed, no circular-reference check (attribute values have no cycles).
_COMPACT = (
    _c_make_encoder(None, json.JSONEncoder().default, _enc_str, None, ":", ",", False, False, True)
    if _c_make_encoder is not None
    else None
)


def _compact(value: Any) -> str:
    if _COMPACT is None:
        return dumps(value)
    return "".join(_COMPACT(value, 0))


def function_text(fn: bir.FunctionOp) -> str:
    """``dumps(function_to_json(fn))``, written op by op without building the JSON document: the text of each
    attribute object is written once and reused (an instruction's roles, engine, source location and dependency
    edges are shared attributes), and strings, ints and arrays are written by their JSON encoders directly."""
    out: list[str] = ['{"format":', _enc_str(FORMAT_VERSION), ","]
    _op_text(fn, {}, out)
    out[3] = out[3][1:]  # the function's own '{' was written as the document's
    return "".join(out)


_KEY_TEXT: dict[str, str] = {}
_AP_TEXT: dict[tuple[Any, ...], str] = {}  # an access pattern's text by its (immutable) value; bounded


def _op_text(op: Operation, memo: dict[int, str], out: list[str]) -> None:
    if op.name not in _OPS:
        raise BirJsonError(f"'{op.name}' is not a BIR op")
    props = []
    for k, v in op.properties.items():
        key = _KEY_TEXT.get(k)
        if key is None:
            key = _KEY_TEXT[k] = _enc_str(k) + ":"
        text = memo.get(id(v))  # a hit without a call: most attributes are shared
        props.append(key + (text if text is not None else _attr_text(v, memo)))
    out.append('{"op":' + _enc_str(op.name) + ',"props":{' + ",".join(props) + "}")
    if op.regions:
        out.append(',"body":[')
        sep = ""
        for child in op.regions[0].block.ops:
            out.append(sep)
            _op_text(child, memo, out)
            sep = ","
        out.append("]")
    out.append("}")


def _attr_text(a: Attribute, memo: dict[int, str]) -> str:
    """The compact JSON of ``attr_to_json(a)``; memoised by identity (every attribute is held by the function being
    written, so no id is reused while the memo lives)."""
    text = memo.get(id(a))
    if text is None:
        t = type(a)  # the cases attr_to_json tries first, written without the intermediate value
        if t is StringAttr:
            text = _enc_str(a.data)  # type: ignore[attr-defined]
        elif t is IntegerAttr and a.type is i64:  # type: ignore[attr-defined]
            text = int.__repr__(a.value.data)  # type: ignore[attr-defined]
        elif t is ArrayAttr:
            items = [memo.get(id(x)) for x in a.data]  # type: ignore[attr-defined]
            if None in items:
                items = [_attr_text(x, memo) for x in a.data]  # type: ignore[attr-defined]
            text = "[" + ",".join(items) + "]"  # type: ignore[arg-type]
        elif t is AccessPatternAttr:  # equal patterns recur as distinct objects (each tile's): by value
            text = _AP_TEXT.get(a.data)  # type: ignore[attr-defined]
            if text is None:
                text = _AP_TEXT[a.data] = _compact(_ap_json(a))  # type: ignore[arg-type, attr-defined]
                if len(_AP_TEXT) > 1 << 16:
                    _AP_TEXT.clear()
        else:
            text = _compact(attr_to_json(a))
        memo[id(a)] = text
    return text


# Functions whose FORM B payload this process wrote, by the payload's SHA-256: ``translate-nki-ast-to-bir`` takes
# the function back instead of parsing the payload and rebuilding every attribute (the round trip is lossless, so
# the two are equal). A payload from anywhere else, or one whose function was already taken, is parsed. Bounded:
# entries nobody takes (a pipeline stopped after penguin-to-bir) are dropped oldest first.
_BUILT: OrderedDict[bytes, bir.FunctionOp] = OrderedDict()
MAX_BUILT = 8


def payload_digest(payload: str) -> bytes:
    return hashlib.sha256(payload.encode()).digest()


def remember_function(payload: str, fn: bir.FunctionOp) -> None:
    """Record that ``payload`` is ``function_to_json(fn)`` serialised (``fn`` must not be changed afterwards)."""
    _BUILT[payload_digest(payload)] = fn
    while len(_BUILT) > MAX_BUILT:
        _BUILT.popitem(last=False)


def take_function(payload: str) -> bir.FunctionOp | None:
    """The function ``remember_function`` recorded for ``payload``, once; None if there is none."""
    return _BUILT.pop(payload_digest(payload), None)
