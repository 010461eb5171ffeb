"""FORM A of the IT56 carrier: nkic's serialized kernel-AST binary ("NKAB"), the traced penguin kernel.

The spec's FORM A carries a KLR-AST binary that the backend walks into a fresh BIR function (``kernel_source =
Beta2``); nkic's equivalent AST is the traced ``penguin.kernel``. Layout, little-endian::

    0   4   magic b"NKAB"
    4   2   version (1)
    6   2   reserved (0)
    8   4   payload length in bytes
    12  4   CRC-32 of the payload
    16  …   payload: zlib-compressed UTF-8 JSON
            {"name", "inputs": [type], "outputs": [type],
             "programs": [{"args": [name], "ops": [op]}]}
            op = {"op": name, "props": {...}, "operands": [value id], "results": [[value id, type, name]],
                  "body": [op] (loops only)}
            type = [memory, [dims], dtype]; value ids are "a<i>" (arguments) or "v<i>" (results)

Properties use the BIR JSON attribute form (``bir_json.attr_to_json``). In an IT56's ``klir_binary`` the bytes travel
inline as ``data:application/x-nkab;base64,<…>``; any other value is read as a path to an NKAB file.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import FunctionType
from xdsl.ir import Block, Operation, Region, SSAValue

from nkic.dialects import penguin
from nkic.dialects.bir_json import attr_from_json, attr_to_json
from nkic.dialects.common import element_type

MAGIC = b"NKAB"
VERSION = 1
DATA_PREFIX = "data:application/x-nkab;base64,"
_HEADER = struct.Struct("<4sHHII")
_OPS: dict[str, type[Operation]] = {op.name: op for op in penguin.Penguin.operations}
MAX_PAYLOAD = 1 << 30


class KlirBinaryError(ValueError):
    pass


def _type_json(t: penguin.TensorType) -> list[Any]:
    return [t.mem, list(t.dims), t.dtype]


def _type_of(j: Any) -> penguin.TensorType:
    mem, dims, dtype = j
    return penguin.TensorType(str(mem), [int(d) for d in dims], element_type(str(dtype)))


class _Writer:
    def __init__(self) -> None:
        self.ids: dict[SSAValue, str] = {}

    def op(self, op: Operation) -> dict[str, Any]:
        out: dict[str, Any] = {
            "op": op.name,
            "props": {k: attr_to_json(v) for k, v in op.properties.items()},
            "operands": [self.ids[v] for v in op.operands],
            "results": [],
        }
        for r in op.results:
            self.ids[r] = f"v{len(self.ids)}"
            out["results"].append([self.ids[r], _type_json(penguin.tensor_type(r)), r.name_hint])
        if op.regions:
            out["body"] = [self.op(o) for o in op.regions[0].block.ops]
        return out

    def program(self, region: Region) -> dict[str, Any]:
        args = []
        for i, a in enumerate(region.block.args):
            self.ids[a] = f"a{i}"
            args.append(a.name_hint or f"arg{i}")
        return {"args": args, "ops": [self.op(o) for o in region.block.ops]}


def encode_kernel(kernel: penguin.KernelOp) -> bytes:
    w = _Writer()
    doc = {
        "name": kernel.sym_name.data,
        "inputs": [_type_json(t) for t in kernel.function_type.inputs.data],  # type: ignore[arg-type]
        "outputs": [_type_json(t) for t in kernel.function_type.outputs.data],  # type: ignore[arg-type]
        "programs": [w.program(r) for r in kernel.programs],
    }
    payload = zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 9)
    return _HEADER.pack(MAGIC, VERSION, 0, len(payload), zlib.crc32(payload)) + payload


class _Reader:
    def __init__(self) -> None:
        self.values: dict[str, SSAValue] = {}

    def op(self, d: dict[str, Any]) -> Operation:
        cls = _OPS.get(d["op"])
        if cls is None:
            raise KlirBinaryError(f"unknown penguin op '{d['op']}'")
        regions = []
        if "body" in d:
            block = Block()
            block.add_ops([self.op(o) for o in d["body"]])
            regions.append(Region(block))
        op = cls.create(
            operands=[self.values[v] for v in d["operands"]],
            result_types=[_type_of(t) for _, t, *_ in d["results"]],
            properties={k: attr_from_json(v) for k, v in d["props"].items()},
            regions=regions,
        )
        for (vid, _, *hint), r in zip(d["results"], op.results):
            self.values[vid] = r
            r.name_hint = hint[0] if hint else None
        return op

    def program(self, d: dict[str, Any], inputs: list[penguin.TensorType]) -> Region:
        block = Block(arg_types=inputs)
        for i, (a, name) in enumerate(zip(block.args, d["args"])):
            a.name_hint = name
            self.values[f"a{i}"] = a
        block.add_ops([self.op(o) for o in d["ops"]])
        return Region(block)


def decode_kernel(data: bytes) -> penguin.KernelOp:
    if len(data) < _HEADER.size:
        raise KlirBinaryError("NKAB data is shorter than its header")
    magic, version, _, size, crc = _HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise KlirBinaryError(f"not an NKAB v{VERSION} kernel binary")
    payload = data[_HEADER.size :]
    if size != len(payload) or size > MAX_PAYLOAD or zlib.crc32(payload) != crc:
        raise KlirBinaryError("NKAB payload is truncated or corrupt")
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(payload, MAX_PAYLOAD)
        doc = json.loads(raw)
        inputs = [_type_of(t) for t in doc["inputs"]]
        outputs = [_type_of(t) for t in doc["outputs"]]
        programs = [_Reader().program(p, inputs) for p in doc["programs"]]
    except (zlib.error, ValueError, KeyError, TypeError, IndexError) as e:
        raise KlirBinaryError(f"malformed NKAB payload: {e}") from e
    kernel = penguin.KernelOp(str(doc["name"]), FunctionType.from_lists(inputs, outputs), programs)
    kernel.verify()
    return kernel


def to_carrier_string(data: bytes) -> str:
    return DATA_PREFIX + base64.b64encode(data).decode()


def from_carrier_string(text: str) -> bytes:
    if text.startswith(DATA_PREFIX):
        try:
            return base64.b64decode(text[len(DATA_PREFIX) :], validate=True)
        except ValueError as e:
            raise KlirBinaryError(f"bad inline NKAB data: {e}") from e
    try:
        return Path(text).read_bytes()
    except OSError as e:
        raise KlirBinaryError(f"cannot read kernel binary '{text}': {e.strerror}") from e
