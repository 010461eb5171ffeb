"""The NEFF container: a 1024-byte header (the documented Neuron NEFF header layout) followed by a gzipped tar of JSON and ISA members.

Writing is byte-for-byte deterministic. Reading never touches the disk, bounds decompression, and turns every
problem into :class:`NeffFormatError` -- a NEFF is untrusted input.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import struct
import tarfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace

from nkic.support import safeio
from nkic.version import __version__
from nkic.runtime.encoding import (
    ENGINES, Instr, Operand, _flag_names, decode_stream, encode_stream, imm_values, operand_json, to_json,
)
from nkic.runtime.errors import NeffFormatError
from nkic.target.collectives import COLLECTIVE_OPCODES
from nkic.target.isa import MAX_STRING_LENGTH
from nkic.target.machine import MAX_HBM_BYTES, queue_sem
from nkic.target.names import MAX_NAME_LENGTH, is_safe_name
from nkic.target.vocab import DTYPES

__all__ = [
    "NeffFormatError", "Variable", "Subgraph", "Neff", "write_neff", "read_neff", "load_neff", "save_neff",
    "ENGINE_MEMBERS", "HEADER_SIZE", "dma_descriptors", "parse_header",
]  # fmt: skip

HEADER_SIZE = 1024
PKG_VERSION_TGZ_SHA256 = 1
NEFF_VERSION = (2, 0)
KELF_VERSION = "0.5"
VAR_KINDS = ("input", "output", "tmp-buf", "file")
# Member stem of each engine inside sgNN/ (the names the Neuron tools use).
ENGINE_MEMBERS: dict[str, str] = {"pe": "PE", "act": "Activation", "dve": "DVE", "pool": "Pool", "sp": "SP"}

# pkg_version, header_size, data_size, neff_version major/minor, build version, num_tpb, hash, uuid, name,
# requested_tpb_count, tpb_per_node, feature_bits, lnc_size, pad
_HEADER = struct.Struct("<QQQQQ128sI32s16s256sI64sQI468s")
assert _HEADER.size == HEADER_SIZE

_SUBGRAPH_RE = re.compile(r"sg\d{2}")
_MEMBER_RE = re.compile(
    r"(neff\.json|info\.json|kelf-0\.json|strings\.json|const/v\d{1,5}\.bin"
    r"|(sg\d{2})/(def\.json|source\.json|(?:PE|Activation|DVE|Pool|SP)\.(?:json|bin)))"
)
_CHUNK = 1 << 16
_NAME_RULE = f"ASCII letters, digits, '_' and '.', starting with a letter or '_', at most {MAX_NAME_LENGTH} characters"


@dataclass
class Variable:
    """An HBM tensor of the kernel; ``size`` in bytes is ``prod(shape) * itemsize``. A ``file`` variable (a
    constant, ``nl.shared_constant``) carries its contents (``data``: ``size`` bytes, row-major, little-endian),
    stored as the raw member ``const/v<var_id>.bin`` that def.json names in its ``file_name``, and loaded into HBM
    before the kernel starts."""

    name: str
    var_id: int
    kind: str
    shape: tuple[int, ...]
    dtype: str
    data: bytes | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape) * DTYPES[self.dtype].itemsize


@dataclass
class Subgraph:
    """One NeuronCore's program: an instruction stream per engine (all five present after reading).

    ``sources`` (optional debug information, the member ``sgNN/source.json``, written only when present): per
    instruction id, where it came from: ``(file:line[:col], nki call)``, e.g. ``("k.py:12:9", "nl.exp")``. The
    binary encoding and the engine listings never depend on it; profiles name each instruction's source with it."""

    name: str
    engines: dict[str, list[Instr]]
    sources: dict[int, tuple[str, str]] = field(default_factory=dict)


@dataclass
class Neff:
    """``strings``: the NEFF's string table (member ``strings.json``, written only when non-empty): a ``str``
    immediate (DEBUG_PRINT's ``prefix``) is an index into it."""

    name: str
    variables: list[Variable]
    subgraphs: list[Subgraph]
    metadata: dict[str, object] = field(default_factory=dict)
    strings: tuple[str, ...] = ()

    def variable(self, name: str) -> Variable:
        for var in self.variables:
            if var.name == name:
                return var
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------------------------
# writing


def _check_names(neff: Neff) -> None:
    """Kernel and variable names become file names when the NEFF runs: only SAFE_NAME (target/names.py) passes."""
    for what, name in [("kernel", neff.name)] + [("variable", v.name) for v in neff.variables]:
        if not is_safe_name(name):
            raise ValueError(f"{what} name {_shown(name)} is not a safe name ({_NAME_RULE})")


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 60 else f"{text[:40]}...' ({len(str(name))} characters)"


def _check_neff(neff: Neff) -> None:
    _check_names(neff)
    names = [v.name for v in neff.variables]
    ids = [v.var_id for v in neff.variables]
    if len(set(names)) != len(names) or len(set(ids)) != len(ids):
        raise ValueError("variable names and var_ids must be unique")
    for var in neff.variables:
        if var.kind not in VAR_KINDS or var.dtype not in DTYPES or not 0 <= var.var_id <= 0xFFFF:
            raise ValueError(f"bad variable {var.name!r} ({var.kind}, {var.dtype}, id {var.var_id})")
        if (var.kind == "file") != (var.data is not None) or (var.data is not None and len(var.data) != var.size):
            raise ValueError(f"variable {var.name!r}: a file variable (and only it) carries exactly {var.size} bytes")
    if not neff.subgraphs:
        raise ValueError("a NEFF needs at least one subgraph")
    for i, sg in enumerate(neff.subgraphs):
        if sg.name != f"sg{i:02d}":
            raise ValueError(f"subgraph {i} must be named sg{i:02d}, got '{sg.name}'")
        if set(sg.engines) - set(ENGINES):
            raise ValueError(f"{sg.name}: unknown engines {sorted(set(sg.engines) - set(ENGINES))}")
        _check_hbm_refs(sg, set(ids), ValueError)
        _check_string_refs(sg, tuple(neff.strings), ValueError)


def _check_hbm_refs(sg: Subgraph, var_ids: set[int], error: Callable[[str], Exception]) -> None:
    for engine, instrs in sg.engines.items():
        for i, ins in enumerate(instrs):
            for op in ins.operands:
                if op is not None and op.memory == "hbm" and op.var_id not in var_ids:
                    raise error(f"{sg.name}/{engine}[{i}] {ins.opcode} references unknown variable id {op.var_id}")


def _dumps(obj: object) -> bytes:
    """``json.dumps(obj, indent=1, sort_keys=True, allow_nan=False)`` and a newline, byte for byte.

    With ``indent`` the standard library encodes in pure Python through nested generators (about 65% of the NEFF
    stage). The members hold only dicts with str keys, lists, str, int, bool, None and finite floats: those are
    written here directly, with the standard library's own scalar encoders; anything else takes json.dumps."""
    out: list[str] = []
    try:
        _dump_into(obj, out, "\n")
    except _NotPlain:
        return (json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()
    out.append("\n")
    return "".join(out).encode()


class _NotPlain(Exception):
    pass


_encode_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _scalar(obj: object) -> str | None:
    """The JSON of a str, int, bool or None (what most values are); None for anything else."""
    t = type(obj)
    if t is str:
        return _encode_str(obj)
    if t is int:
        return int.__repr__(obj)  # type: ignore[arg-type]
    if t is bool:
        return "true" if obj else "false"
    if obj is None:
        return "null"
    return None


def _dump_into(obj: object, out: list[str], newline: str) -> None:
    """Append the indent=1 JSON of ``obj``; ``newline`` is a newline and the current indentation. Scalar items of
    a list or dict are written in its loop, not by a call each (they are most of an engine member's values)."""
    t = type(obj)
    if t is list or t is tuple:
        if not obj:
            out.append("[]")
            return
        inner = newline + " "
        sep = "," + inner
        out.append("[")
        for i, item in enumerate(obj):  # type: ignore[arg-type]
            text = _scalar(item)
            if text is not None:
                out.append((inner if i == 0 else sep) + text)
            else:
                out.append(inner if i == 0 else sep)
                _dump_into(item, out, inner)
        out.append(newline + "]")
    elif t is dict:
        if not obj:
            out.append("{}")
            return
        if any(type(k) is not str for k in obj):  # type: ignore[union-attr]
            raise _NotPlain
        inner = newline + " "
        sep = "," + inner
        out.append("{")
        for i, key in enumerate(sorted(obj)):  # type: ignore[arg-type]
            head = (inner if i == 0 else sep) + _encode_str(key) + ": "
            value = obj[key]  # type: ignore[index]
            text = _scalar(value)
            if text is not None:
                out.append(head + text)
            else:
                out.append(head)
                _dump_into(value, out, inner)
        out.append(newline + "}")
    else:
        text = _scalar(obj)
        if text is not None:
            out.append(text)
        elif t is float:
            if obj != obj or obj in (math.inf, -math.inf):  # json.dumps(allow_nan=False) raises: let it
                raise _NotPlain
            out.append(float.__repr__(obj))  # type: ignore[arg-type]
        else:
            raise _NotPlain


def _const_member(var_id: int) -> str:
    return f"const/v{var_id}.bin"


def _var_json(var: Variable) -> dict[str, object]:
    out = {"type": var.kind, "var_id": var.var_id, "size": var.size, "shape": list(var.shape), "dtype": var.dtype}
    if var.kind == "file":
        out["file_name"] = _const_member(var.var_id)
    return out


def _dma_queues(sg: Subgraph) -> dict[str, dict[str, object]]:
    queues = sorted({ins.imm("queue") for ins in sg.engines.get("sp", []) if "dma" in ins.spec.traits})
    return {f"q{q}": {"type": "data", "num_queues": 1, "owner": "sp", "semaphore": queue_sem(q)} for q in queues}


def _def_json(neff: Neff, sg: Subgraph) -> dict[str, object]:
    out: dict[str, object] = {"name": "definition", "var": {v.name: _var_json(v) for v in neff.variables}}
    for engine, stem in ENGINE_MEMBERS.items():
        out[engine] = f"{stem}.json"
        out[f"{engine}_instr"] = f"{stem}.bin"
    out["dma_queue"] = _dma_queues(sg)
    return out


def _ap_desc(op: Operand, var_names: Mapping[int, str], side: str) -> dict[str, object]:
    """A DMA-descriptor-style view of one side of a transfer: steps in bytes and sizes innermost first."""
    pairs = list(reversed(op.pattern))
    where = var_names.get(op.var_id, f"v{op.var_id}") if op.memory == "hbm" else op.memory
    desc: dict[str, object] = {
        side: where,
        f"{side}_off": op.address,
        f"{side}_steps": [s * op.itemsize for s, _ in pairs],
        f"{side}_sizes": [pairs[0][1] * op.itemsize] + [n for _, n in pairs[1:]],
        f"{side}_dtype": op.dtype,
    }
    if op.memory != "hbm":
        desc[f"{side}_partition"] = op.start_partition
    return desc


def _dma_desc(ins: Instr, var_names: Mapping[int, str]) -> dict[str, object] | None:
    """The ``desc`` of a DMA_COPY or DMA_COMPUTE's ``dma`` entry; None for any other instruction."""
    dst, src = ins.operand(0), ins.operand(1)
    if "dma" not in ins.spec.traits or ins.opcode in COLLECTIVE_OPCODES or dst is None or src is None:
        return None  # DEBUG_PRINT (one operand) goes to the host; a collective's transfers are its replica group's
    if any(imm.prop == "reduce_op" for imm in ins.spec.imms):  # DMA_COMPUTE: the queue combines its sources
        op = f"compute_{ins.value('reduce_op')}"
    elif ins.flag("transpose"):
        op = "transpose"
    else:
        op = "copy" if dst.dtype == src.dtype else "cast"
    desc: dict[str, object] = {"op": op, **_ap_desc(src, var_names, "from"), **_ap_desc(dst, var_names, "to")}
    for k, more in enumerate(ins.operands[2:], 1):
        if more is not None:
            desc.update(_ap_desc(more, var_names, f"from{k}"))
    return desc


def _dma_entry(index: int, ins: Instr, desc: object) -> dict[str, object]:
    return {"id": index, "queue": f"q{ins.imm(0)}", "semaphore": ins.signal_sem, "desc": desc}


def dma_descriptors(instrs: list[Instr], var_names: Mapping[int, str]) -> list[dict[str, object]]:
    """The ``dma`` table of ``SP.json``: one entry per DMA_COPY or DMA_COMPUTE, tied to it by ``id`` (its index in
    the stream); a DMA_COMPUTE's further sources are ``from1``, ``from2``, …"""
    out = []
    for index, ins in enumerate(instrs):
        desc = _dma_desc(ins, var_names)
        if desc is not None:
            out.append(_dma_entry(index, ins, desc))
    return out


def _engine_json(engine: str, instrs: list[Instr], var_names: Mapping[int, str]) -> dict[str, object]:
    out: dict[str, object] = {"engine": engine, "instructions": to_json(instrs, var_names)}
    if engine == "sp":
        out["dma"] = dma_descriptors(instrs, var_names)
    return out


# The keys of an instruction's entry in an engine listing (``to_json``), in the sorted order the listing has.
_INSTR_KEYS = ("engine", "flags", "imms", "index", "inst_id", "mnemonic", "opcode", "operands", "signal", "wait")
_NL2, _NL3, _NL4 = "\n  ", "\n   ", "\n    "  # the listing's entries, their fields, a field's items (indent=1)


def _text(obj: object, newline: str) -> str:
    """The indent=1 JSON of ``obj`` written at indentation ``newline`` (raises _NotPlain like _dump_into)."""
    out: list[str] = []
    _dump_into(obj, out, newline)
    return "".join(out)


class _ListingWriter:
    """An engine member, ``_dumps(_engine_json(engine, instrs, var_names))`` byte for byte, written without
    building the JSON values of every instruction. An instruction's operands, immediates and flags, and a
    transfer's descriptor, repeat across a stream (the same SBUF tiles, the same few immediates): each distinct one
    is built by the same function as ``to_json``/``dma_descriptors`` and written by the generic writer once, at the
    depth it sits at, and its text reused. ``listing`` checks the entry keys against ``to_json`` first and takes
    the generic path if they ever differ, so the two cannot drift apart silently."""

    def __init__(self, var_names: Mapping[int, str]) -> None:
        self.var_names = var_names
        self.operands: dict[tuple[str, Operand], str] = {}  # (slot, operand) -> '"slot": {...}' at depth 4
        self.templates: dict[tuple[object, ...], tuple[str, str] | tuple[()]] = {}  # see _operand
        self.imms: dict[tuple[str, tuple[int, ...], int], tuple[str, str]] = {}  # -> (flags, imms) at depth 3
        self.descs: dict[tuple[object, ...], str] = {}  # a transfer's descriptor at depth 3
        self.desc_templates: dict[tuple[object, ...], tuple[list[str], list[int]] | None] = {}  # see _dma

    def listing(self, engine: str, instrs: list[Instr]) -> bytes:
        if instrs and tuple(sorted(to_json(instrs[:1], self.var_names)[0])) != _INSTR_KEYS:
            return _dumps(_engine_json(engine, instrs, self.var_names))
        try:
            entries = [self._instr(i, ins) for i, ins in enumerate(instrs)]
            head = ""
            if engine == "sp":
                dma = [self._dma(i, ins) for i, ins in enumerate(instrs)]
                head = '"dma": ' + self._list([d for d in dma if d is not None]) + ",\n "
            body = ["{\n ", head, '"engine": ', _scalar_text(engine), ',\n "instructions": ', self._list(entries)]
        except _NotPlain:
            return _dumps(_engine_json(engine, instrs, self.var_names))
        body.append("\n}\n")
        return "".join(body).encode()

    @staticmethod
    def _list(entries: list[str]) -> str:
        """A list at depth 1 whose entries (at depth 2) are written already."""
        return "[" + _NL2 + ("," + _NL2).join(entries) + "\n ]" if entries else "[]"

    def _instr(self, index: int, ins: Instr) -> str:
        key = (ins.opcode, ins.imms, ins.flags)
        flags_imms = self.imms.get(key)
        if flags_imms is None:
            flags_imms = self.imms[key] = (_text(_flag_names(ins), _NL3), _text(imm_values(ins), _NL3))
        slots = ins.spec.slots
        ops = sorted((slots[i], op) for i, op in enumerate(ins.operands) if op is not None)
        operands = "{}"
        if ops:
            operands = "{" + _NL4 + ("," + _NL4).join(self._operand(s, op) for s, op in ops) + _NL3 + "}"
        wait = "null" if ins.wait_sem is None else _text({"sem": ins.wait_sem, "value": ins.wait_value}, _NL3)
        values = (_scalar_text(ins.engine), flags_imms[0], flags_imms[1], _scalar_text(index),
                  _scalar_text(ins.inst_id), _scalar_text(ins.opcode), _scalar_text(ins.spec.code), operands,
                  _scalar_text(ins.signal_sem), wait)  # fmt: skip
        return "{" + _NL3 + ("," + _NL3).join(_KEY_HEADS[k] + v for k, v in zip(_INSTR_KEYS, values)) + _NL2 + "}"

    def _operand(self, slot: str, op: Operand) -> str:
        """``"slot": {...}``. The operands of a stream differ mostly in their address alone (7617 operands, 40
        without the address, at 16K attention): the text is kept per operand less its address, with the address
        put back in front (it is the first key), when ``_address_template`` has shown that only that line moves."""
        key = (slot, *[getattr(op, f) for f in _OPERAND_FIELDS])
        template = self.templates.get(key)
        if template is None:
            template = self.templates[key] = self._address_template(slot, op)
        if template:
            return f"{template[0]}{op.address}{template[1]}"
        text = self.operands.get((slot, op))
        if text is None:
            text = self.operands[(slot, op)] = self._operand_text(slot, op)
        return text

    def _desc_text(self, ins: Instr, addresses: list[int | None]) -> str:
        """The descriptor text of ``ins`` with its operands moved to ``addresses`` ("" if it has none)."""
        ops = tuple(None if o is None else replace(o, address=a) for o, a in zip(ins.operands, addresses))
        value = _dma_desc(replace(ins, operands=ops), self.var_names)
        return "" if value is None else _text(value, _NL3)

    def _desc_template(self, ins: Instr) -> tuple[list[str], list[int]] | None:
        """(parts, operand index of each address between them) that give the descriptor text of every transfer
        equal to ``ins`` but for its operands' addresses; None if no such template holds (checked: the descriptor
        written from the template at the real and at other addresses is the one built from the instruction)."""
        ops = ins.operands
        marks = [None if o is None else _ADDRESS_MARK + 2 * i for i, o in enumerate(ops)]
        text = self._desc_text(ins, marks)
        if not text:
            return None
        found = re.split("(" + "|".join(str(m) for m in marks if m is not None) + ")", text)
        parts, which = found[::2], [marks.index(int(m)) for m in found[1::2]]
        for trial in ([None if o is None else o.address for o in ops], [None if m is None else m + 1 for m in marks]):
            built = parts[0] + "".join(f"{trial[i]}{part}" for i, part in zip(which, parts[1:]))
            if built != self._desc_text(ins, trial):
                return None
        return parts, which

    def _operand_text(self, slot: str, op: Operand) -> str:
        return _encode_str(slot) + ": " + _text(operand_json(op, self.var_names), _NL4)

    def _address_template(self, slot: str, op: Operand) -> tuple[str, str] | tuple[()]:
        """(head, tail) with ``head + str(address) + tail`` the text of ``op`` at any address, or () if the text
        of ``op`` at another address is not that (no address, or another value that depends on it)."""
        if type(op.address) is not int:
            return ()
        head = _encode_str(slot) + ": {" + _NL4 + ' "address": '
        tails = set()
        for address in (op.address, op.address + 1):
            text = self._operand_text(slot, replace(op, address=address))
            if not text.startswith(f"{head}{address}"):
                return ()
            tails.add(text[len(f"{head}{address}") :])
        return (head, tails.pop()) if len(tails) == 1 else ()

    def _dma(self, index: int, ins: Instr) -> str | None:
        if "dma" not in ins.spec.traits:
            return None
        where = [None if o is None else tuple(getattr(o, f) for f in _OPERAND_FIELDS) for o in ins.operands]
        key = (ins.opcode, ins.imms, ins.flags, *where)  # the instruction less its operands' addresses
        template = self.desc_templates.get(key)
        if template is None:
            template = self.desc_templates[key] = self._desc_template(ins)
        if template is not None:  # the transfers of a stream differ mostly in their addresses alone, as operands
            parts, which = template
            addresses = [None if o is None else o.address for o in ins.operands]
            desc = parts[0] + "".join(f"{addresses[i]}{part}" for i, part in zip(which, parts[1:]))
        else:
            full = (ins.opcode, ins.imms, ins.flags, ins.operands)
            desc = self.descs.get(full)
            if desc is None:
                value = _dma_desc(ins, self.var_names)
                desc = self.descs[full] = "" if value is None else _text(value, _NL3)
        if not desc:
            return None
        entry = _dma_entry(index, ins, None)
        del entry["desc"]
        return ("{" + _NL3 + '"desc": ' + desc + "," + _NL3
                + ("," + _NL3).join(_encode_str(k) + ": " + (_scalar(entry[k]) or _text(entry[k], _NL3))
                                    for k in sorted(entry))
                + _NL2 + "}")  # fmt: skip


_KEY_HEADS = {k: _encode_str(k) + ": " for k in _INSTR_KEYS}
_ADDRESS_MARK = 987_654_321_987_654_321  # stand-in addresses, far from any other number of a descriptor
_OPERAND_FIELDS = tuple(f.name for f in fields(Operand) if f.name != "address")


def _scalar_text(obj: object) -> str:
    text = _scalar(obj)
    if text is None:
        raise _NotPlain
    return text


def _neff_json(neff: Neff) -> dict[str, object]:
    io_vars = [
        {"name": v.name, "size": v.size, "usage": "IN" if v.kind == "input" else "OUT", "format": "NC",
         "shape": list(v.shape), "dtype": v.dtype}
        for v in sorted(neff.variables, key=lambda v: v.var_id) if v.kind in ("input", "output")
    ]  # fmt: skip
    nodes = [{"name": f"NeuronCore {sg.name}", "subgraph": sg.name, "io": io_vars} for sg in neff.subgraphs]
    return {"name": neff.name, "version": "%d.%d" % NEFF_VERSION, "nodes": nodes}


def _members(neff: Neff) -> dict[str, bytes]:
    var_names = {v.var_id: v.name for v in neff.variables}
    members = {
        "neff.json": _dumps(_neff_json(neff)),
        "info.json": _dumps({"tool_version": f"nkic {__version__}", "metadata": neff.metadata}),
        "kelf-0.json": _dumps(
            {"graphs": [{"name": sg.name, "definition": f"{sg.name}/def.json"} for sg in neff.subgraphs],
             "version": KELF_VERSION}
        ),
    }  # fmt: skip
    for var in neff.variables:
        if var.data is not None:
            members[_const_member(var.var_id)] = var.data
    listing = _ListingWriter(var_names)
    for sg in neff.subgraphs:
        members[f"{sg.name}/def.json"] = _dumps(_def_json(neff, sg))
        for engine, stem in ENGINE_MEMBERS.items():
            instrs = list(sg.engines.get(engine, []))
            members[f"{sg.name}/{stem}.bin"] = encode_stream(engine, instrs)
            members[f"{sg.name}/{stem}.json"] = listing.listing(engine, instrs)
        if sg.sources:
            members[f"{sg.name}/source.json"] = _dumps(
                {"instructions": [[i, loc, call] for i, (loc, call) in sorted(sg.sources.items())]})
    if neff.strings:  # absent when no instruction names a string: the NEFFs of other kernels keep their bytes
        members["strings.json"] = _dumps({"strings": list(neff.strings)})
    return members


def _tar(members: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(members[name]), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(members[name]))
    return buf.getvalue()


def _gzip(data: bytes) -> bytes:
    # Hand-rolled gzip framing: gzip.compress would also be deterministic with mtime=0, but this keeps the OS
    # byte and flags fixed across Python versions.
    comp = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = comp.compress(data) + comp.flush()
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + body + trailer


def _header(neff: Neff, payload: bytes) -> bytes:
    name = neff.name.encode()
    n = len(neff.subgraphs)
    return _HEADER.pack(
        PKG_VERSION_TGZ_SHA256, HEADER_SIZE, len(payload), *NEFF_VERSION, f"nkic {__version__}".encode(), n,
        hashlib.sha256(payload).digest(), hashlib.sha256(name + payload).digest()[:16], name, n, b"", 0, n, b"",
    )  # fmt: skip


def write_neff(neff: Neff) -> bytes:
    """Serialise ``neff``; the same input always gives the same bytes."""
    _check_neff(neff)
    payload = _gzip(_tar(_members(neff)))
    return _header(neff, payload) + payload


def save_neff(neff: Neff, path: str | os.PathLike[str]) -> None:
    """Write ``neff`` to ``path`` atomically, never through a symbolic link (``nkic.support.safeio``)."""
    safeio.write_bytes(path, write_neff(neff))


# ---------------------------------------------------------------------------------------------------------------
# reading


def _bad(msg: str) -> NeffFormatError:
    return NeffFormatError(f"invalid NEFF: {msg}")


def _cstr(raw: bytes, what: str) -> str:
    text, _, rest = raw.partition(b"\0")
    if rest.strip(b"\0"):
        raise _bad(f"header {what} has bytes after its terminator")
    try:
        return text.decode()
    except UnicodeDecodeError as e:
        raise _bad(f"header {what} is not UTF-8") from e


def parse_header(data: bytes) -> dict[str, object]:
    """Validate the 1024-byte header against the payload that follows it; returns the decoded fields."""
    if len(data) < HEADER_SIZE:
        raise _bad(f"file is {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    (pkg, hsize, dsize, vmaj, vmin, build, num_tpb, digest, uuid, name, req_tpb, per_node, features, lnc,
     pad) = _HEADER.unpack_from(data)  # fmt: skip
    if pkg != PKG_VERSION_TGZ_SHA256:
        raise _bad(f"pkg_version {pkg} is not supported (only 1 = tgz + SHA-256)")
    if hsize != HEADER_SIZE:
        raise _bad(f"header_size {hsize} (expected {HEADER_SIZE})")
    if (vmaj, vmin) != NEFF_VERSION:
        raise _bad(f"NEFF version {vmaj}.{vmin} is not supported (expected %d.%d)" % NEFF_VERSION)
    if features:
        raise _bad(f"feature bits {features:#x} are not supported")
    if dsize != len(data) - HEADER_SIZE:
        raise _bad(f"data_size {dsize} but the file holds {len(data) - HEADER_SIZE} payload bytes")
    if hashlib.sha256(data[HEADER_SIZE:]).digest() != digest:
        raise _bad("payload SHA-256 does not match the header hash (corrupted file)")
    if not 1 <= num_tpb <= 64 or req_tpb != num_tpb or lnc != num_tpb:
        raise _bad(f"inconsistent core counts: num_tpb={num_tpb} requested={req_tpb} lnc_size={lnc}")
    if pad.strip(b"\0") or per_node.strip(b"\0"):
        raise _bad("header tpb_per_node / padding bytes are not zero")
    kernel = _cstr(name, "name")
    if not is_safe_name(kernel):
        raise _bad(f"header name {_shown(kernel)} is not a safe name ({_NAME_RULE})")
    return {"name": kernel, "build_version": _cstr(build, "build version"), "num_tpb": num_tpb,
            "uuid": uuid.hex(), "hash": digest.hex()}  # fmt: skip


def _gunzip(payload: bytes, limit: int) -> bytes:
    """Decompress one gzip member, refusing to produce more than ``limit`` bytes (declared sizes are not trusted)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    view, pos = memoryview(payload), 0
    try:
        while not d.eof:
            # Feed the input a chunk at a time: the unconsumed tail is then at most one chunk, so the work stays
            # linear in the payload (feeding it whole would copy the rest of it on every call).
            pending = d.unconsumed_tail or view[pos : pos + _CHUNK]
            if not d.unconsumed_tail:
                pos += len(pending)
            if not pending:
                raise _bad("gzip stream is truncated")
            out += d.decompress(pending, limit + 1 - len(out))
            if len(out) > limit:
                raise _bad(f"payload unpacks to more than {limit} bytes")
    except zlib.error as e:
        raise _bad(f"gzip stream is corrupt ({e})") from e
    if d.unused_data:
        raise _bad("trailing bytes after the gzip stream")
    return bytes(out)


def _unpack_payload(payload: bytes, limit: int) -> bytes:
    if payload[:2] == b"\x1f\x8b":
        return _gunzip(payload, limit)
    # neuron-packager can store the tar uncompressed, so sniff for a ustar header.
    if payload[257:262] == b"ustar":
        if len(payload) > limit:
            raise _bad(f"payload is larger than {limit} bytes")
        return payload
    raise _bad("payload is neither gzip nor tar")


def _check_member_name(info: tarfile.TarInfo, seen: dict[str, bytes]) -> None:
    name = info.name
    if name.startswith("/") or "\\" in name or ".." in name.split("/"):
        raise _bad(f"unsafe member path '{name}'")
    if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
        raise _bad(f"member '{name}' is not a regular file (links, devices and directories are refused)")
    if not _MEMBER_RE.fullmatch(name):
        raise _bad(f"unexpected member '{name}'")
    if name in seen:
        raise _bad(f"duplicate member '{name}'")


def _untar(raw: bytes) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for info in tar:
                _check_member_name(info, members)
                f = tar.extractfile(info)
                data = f.read() if f is not None else b""
                if len(data) != info.size:
                    raise _bad(f"member '{info.name}' is truncated")
                members[info.name] = data
    except tarfile.TarError as e:
        raise _bad(f"tar archive is corrupt ({e})") from e
    return members


def _load_json(members: Mapping[str, bytes], name: str) -> dict[str, object]:
    if name not in members:
        raise _bad(f"missing member '{name}'")
    try:
        obj = json.loads(members[name].decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _bad(f"member '{name}' is not valid JSON ({type(e).__name__}: {e})") from e
    if not isinstance(obj, dict):
        raise _bad(f"member '{name}' must hold a JSON object")
    return obj


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise _bad(msg)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _parse_var(name: object, spec: object, where: str) -> Variable:
    _expect(isinstance(name, str) and isinstance(spec, dict), f"{where}: bad variable entry")
    assert isinstance(spec, dict) and isinstance(name, str)
    _expect(is_safe_name(name), f"{where}: variable name {_shown(name)} is not a safe name ({_NAME_RULE})")
    kind, var_id, dtype, shape, size = (spec.get(k) for k in ("type", "var_id", "dtype", "shape", "size"))
    _expect(kind in VAR_KINDS, f"{where}: variable '{name}' has bad type {kind!r}")
    _expect(_is_int(var_id) and 0 <= var_id <= 0xFFFF, f"{where}: variable '{name}' has bad var_id")  # type: ignore
    _expect(isinstance(dtype, str) and dtype in DTYPES, f"{where}: variable '{name}' has bad dtype {dtype!r}")
    _expect(isinstance(shape, list) and all(_is_int(n) and n >= 0 for n in shape),  # type: ignore[union-attr]
            f"{where}: variable '{name}' has bad shape")  # fmt: skip
    var = Variable(name, var_id, kind, tuple(shape), dtype)  # type: ignore[arg-type]
    _expect(size == var.size, f"{where}: variable '{name}' size {size!r} != {var.size}")
    _expect(spec.get("file_name") == (_const_member(var_id) if kind == "file" else None),  # type: ignore[arg-type]
            f"{where}: variable '{name}' has a bad file_name")  # fmt: skip
    return var


def _parse_vars(defn: dict[str, object], where: str) -> list[Variable]:
    table = defn.get("var")
    _expect(isinstance(table, dict), f"{where}: 'var' must be an object")
    assert isinstance(table, dict)
    variables = sorted((_parse_var(k, v, where) for k, v in table.items()), key=lambda v: v.var_id)
    _expect(len({v.var_id for v in variables}) == len(variables), f"{where}: duplicate var_id")
    total = sum(v.size for v in variables)
    _expect(total <= MAX_HBM_BYTES, f"{where}: the variables need {total} bytes, more than the {MAX_HBM_BYTES} "
            "bytes of HBM of any NeuronCore")  # fmt: skip
    return variables


def _parse_kelf(members: Mapping[str, bytes], num_tpb: int) -> list[str]:
    kelf = _load_json(members, "kelf-0.json")
    graphs = kelf.get("graphs")
    _expect(kelf.get("version") == KELF_VERSION, "kelf-0.json: unsupported version")
    _expect(isinstance(graphs, list) and len(graphs) == num_tpb,
            f"kelf-0.json: expected {num_tpb} graphs (header num_tpb)")  # fmt: skip
    assert isinstance(graphs, list)
    names = []
    for i, g in enumerate(graphs):
        name = f"sg{i:02d}"
        _expect(isinstance(g, dict) and g.get("name") == name and g.get("definition") == f"{name}/def.json",
                f"kelf-0.json: graph {i} must be {{'name': '{name}', 'definition': '{name}/def.json'}}")  # fmt: skip
        names.append(name)
    return names


def _parse_engine(members: Mapping[str, bytes], sg: str, defn: dict[str, object], engine: str) -> list[Instr]:
    stem = ENGINE_MEMBERS[engine]
    _expect(defn.get(engine) == f"{stem}.json" and defn.get(f"{engine}_instr") == f"{stem}.bin",
            f"{sg}/def.json: '{engine}' must name {stem}.json / {stem}.bin")  # fmt: skip
    bin_name = f"{sg}/{stem}.bin"
    _expect(bin_name in members, f"missing member '{bin_name}'")
    try:
        stream_engine, instrs = decode_stream(members[bin_name])
    except NeffFormatError as e:
        raise _bad(f"{bin_name}: {e}") from e
    _expect(stream_engine == engine, f"{bin_name} holds a {stream_engine} stream")
    return instrs  # its JSON listing is checked against these, entry by entry, by _check_listing


def _check_listing(members: Mapping[str, bytes], sg: str, engine: str, instrs: list[Instr],
                   var_names: Mapping[int, str]) -> None:  # fmt: skip
    stem = ENGINE_MEMBERS[engine]
    listing = _load_json(members, f"{sg}/{stem}.json")
    entries = listing.get("instructions")
    _expect(isinstance(entries, list) and len(entries) == len(instrs),
            f"{sg}/{stem}.json does not list the {len(instrs)} instructions of {stem}.bin")  # fmt: skip
    # The listing is what tools and people read: it must say exactly what the binary does (the writer derives it
    # from the instructions, so the two agree entry by entry, DMA table included).
    expected = json.loads(_dumps(_engine_json(engine, instrs, var_names)))
    if listing != expected:
        raise _bad(f"{sg}/{stem}.json disagrees with {stem}.bin{_first_difference(listing, expected)}")


def _first_difference(listing: dict[str, object], expected: dict[str, object]) -> str:
    got, want = listing.get("instructions"), expected["instructions"]
    if isinstance(got, list) and isinstance(want, list):
        for i, (a, b) in enumerate(zip(got, want)):
            if a != b:
                return f" at instruction {i}"
    keys = sorted(k for k in set(listing) | set(expected) if listing.get(k) != expected.get(k))
    return f" in {', '.join(repr(k) for k in keys[:3])}" if keys else ""


def _check_queues(sg: Subgraph, defn: dict[str, object]) -> None:
    queues = defn.get("dma_queue")
    _expect(isinstance(queues, dict), f"{sg.name}/def.json: 'dma_queue' must be an object")
    assert isinstance(queues, dict)
    for name in _dma_queues(sg):
        _expect(name in queues, f"{sg.name}/def.json: DMA queue '{name}' is used but not declared")


def _parse_subgraph(members: Mapping[str, bytes], sg: str) -> tuple[Subgraph, list[Variable]]:
    defn = _load_json(members, f"{sg}/def.json")
    _expect(defn.get("name") == "definition", f"{sg}/def.json: name must be 'definition'")
    variables = _parse_vars(defn, f"{sg}/def.json")
    subgraph = Subgraph(sg, {e: _parse_engine(members, sg, defn, e) for e in ENGINES})
    _check_queues(subgraph, defn)
    _check_hbm_refs(subgraph, {v.var_id for v in variables}, _bad)
    names = {v.var_id: v.name for v in variables}
    for engine, instrs in subgraph.engines.items():
        _check_listing(members, sg, engine, instrs, names)
    if f"{sg}/source.json" in members:
        subgraph.sources = _parse_sources(members, subgraph)
    return subgraph, variables


_MAX_SOURCE_TEXT = 4096


def _parse_sources(members: Mapping[str, bytes], sg: Subgraph) -> dict[int, tuple[str, str]]:
    """``sgNN/source.json``: ``{"instructions": [[id, "file:line", "call"], ...]}``, ids increasing, each one an
    instruction of the subgraph."""
    where = f"{sg.name}/source.json"
    entries = _load_json(members, where).get("instructions")
    _expect(isinstance(entries, list), f"{where}: 'instructions' must be a list")
    ids = {ins.inst_id for instrs in sg.engines.values() for ins in instrs}
    out: dict[int, tuple[str, str]] = {}
    last = -1
    for e in entries:  # type: ignore[union-attr]
        _expect(isinstance(e, list) and len(e) == 3 and _is_int(e[0]) and all(isinstance(x, str) for x in e[1:])
                and all(len(x) <= _MAX_SOURCE_TEXT for x in e[1:]), f"{where}: bad entry {str(e)[:80]}")  # fmt: skip
        _expect(e[0] > last and e[0] in ids, f"{where}: entry {e[0]} is out of order or names no instruction")
        last = e[0]
        out[e[0]] = (e[1], e[2])
    return out


def _check_io(neff_json: dict[str, object], variables: list[Variable], sgs: list[str]) -> None:
    nodes = neff_json.get("nodes")
    _expect(isinstance(nodes, list) and len(nodes) == len(sgs), "neff.json: expected one node per subgraph")
    assert isinstance(nodes, list)
    expected = {v.name: v for v in variables if v.kind != "tmp-buf"}
    for node, sg in zip(nodes, sgs):
        _expect(isinstance(node, dict) and node.get("subgraph") == sg and isinstance(node.get("io"), list),
                f"neff.json: bad node for {sg}")  # fmt: skip
        for entry in node["io"]:
            _expect(isinstance(entry, dict), f"neff.json: bad io entry in {sg}")
            name = entry.get("name")
            var = expected.get(name) if isinstance(name, str) else None
            _expect(var is not None and entry.get("size") == var.size and entry.get("dtype") == var.dtype
                    and entry.get("usage") == ("IN" if var.kind == "input" else "OUT")
                    and entry.get("shape") == list(var.shape),
                    f"neff.json: io entry {name!r} of {sg} disagrees with def.json")  # fmt: skip


def _check_member_set(members: Mapping[str, bytes], sgs: list[str]) -> None:
    for name in members:
        m = _MEMBER_RE.fullmatch(name)
        _expect(m is not None and (m.group(2) is None or m.group(2) in sgs), f"member '{name}' is unexpected")


def _attach_constants(members: Mapping[str, bytes], variables: list[Variable]) -> None:
    """Give every file variable its member's bytes; a const/ member without its variable is refused."""
    consts = {_const_member(v.var_id): v for v in variables if v.kind == "file"}
    for name in members:
        _expect(not name.startswith("const/") or name in consts, f"member '{name}' belongs to no file variable")
    for name, var in consts.items():
        _expect(name in members, f"file variable '{var.name}' has no member '{name}'")
        _expect(len(members[name]) == var.size, f"member '{name}' has {len(members[name])} bytes, not {var.size}")
        var.data = members[name]


def _parse_strings(members: Mapping[str, bytes]) -> tuple[str, ...]:
    """``strings.json``: ``{"strings": [str, ...]}``, each at most MAX_STRING_LENGTH characters; absent = none."""
    if "strings.json" not in members:
        return ()
    table = _load_json(members, "strings.json").get("strings")
    _expect(isinstance(table, list) and all(isinstance(x, str) and len(x) <= MAX_STRING_LENGTH for x in table),
            f"strings.json: 'strings' must be a list of strings of at most {MAX_STRING_LENGTH} characters")
    assert isinstance(table, list)
    _expect(len(set(table)) == len(table), "strings.json: a string is listed twice")
    return tuple(table)


def _check_string_refs(sg: Subgraph, strings: tuple[str, ...], error: Callable[[str], Exception]) -> None:
    """Every ``str`` immediate (DEBUG_PRINT's ``prefix``) names an entry of the string table."""
    for engine, instrs in sg.engines.items():
        for i, ins in enumerate(instrs):
            for k, imm in enumerate(ins.spec.imms):
                if imm.kind == "str" and ins.imm(k) >= len(strings):
                    raise error(f"{sg.name}/{ENGINE_MEMBERS[engine]}.bin instruction {i}: {ins.opcode} {imm.prop} "
                                f"names string {ins.imm(k)}, but the NEFF's string table holds {len(strings)}")


def _read(data: bytes, limit: int) -> Neff:
    header = parse_header(data)
    members = _untar(_unpack_payload(data[HEADER_SIZE:], limit))
    sgs = _parse_kelf(members, header["num_tpb"])  # type: ignore[arg-type]
    _check_member_set(members, sgs)
    parsed = [_parse_subgraph(members, sg) for sg in sgs]
    variables = parsed[0][1]
    _expect(all(p[1] == variables for p in parsed), "subgraphs disagree on the variable table")
    neff_json = _load_json(members, "neff.json")
    _expect(neff_json.get("name") == header["name"], "neff.json name differs from the header name")
    _check_io(neff_json, variables, sgs)
    _attach_constants(members, variables)
    strings = _parse_strings(members)
    for sg in parsed:
        _check_string_refs(sg[0], strings, _bad)
    info = _load_json(members, "info.json")
    metadata = info.get("metadata", {})
    _expect(isinstance(info.get("tool_version"), str) and isinstance(metadata, dict), "info.json: bad schema")
    return Neff(header["name"], variables, [p[0] for p in parsed], metadata, strings)  # type: ignore[arg-type]


def read_neff(data: bytes, *, max_unpacked_bytes: int = 1 << 30) -> Neff:
    """Parse and validate a NEFF. Every problem raises NeffFormatError; nothing is written to disk."""
    try:
        return _read(bytes(data), max_unpacked_bytes)
    except NeffFormatError:
        raise
    except (tarfile.TarError, zlib.error, EOFError, OSError, ValueError, struct.error, UnicodeError, TypeError,
            KeyError, IndexError, AttributeError, RecursionError) as e:
        # Backstop for parser failures the checks above did not anticipate: still a format error, not a crash.
        raise _bad(f"{type(e).__name__}: {e}") from e


def load_neff(path: str | os.PathLike[str], *, max_unpacked_bytes: int = 1 << 30) -> Neff:
    with open(path, "rb") as f:
        return read_neff(f.read(), max_unpacked_bytes=max_unpacked_bytes)
