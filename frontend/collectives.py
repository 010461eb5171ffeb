"""``nki.collectives``: collective communication between ranks (``nki.collectives.rst`` and its stubs).

A kernel launched on N ranks (``nki.simulate(kernel, ranks=N)``, ``nkic run --ranks N``) runs once per rank, each
with its own HBM; every function here records one instruction of ``target/collectives.py`` per tensor pair (a
coalesced list is that many collectives, issued in order), and the simulator makes the members of each replica
group meet (ARCHITECTURE.md, "Ranks and collectives"). What the reference restricts is checked here, at the user's
line: memories ("all tensors must be on HBM or all must be on SBUF", "Coalesced ... only ... on HBM", HBM only for
all_to_all / collective_permute / the _v forms), shapes against the group size, ``collective_dim``, ``op`` (add,
minimum, maximum), ``channel_ids`` ("consecutive integers starting from 0"), ``priority`` (0-3, NeuronCore-v4+).

Every rank runs the same program, so every list of a ``ReplicaGroup`` must have the same size (the shapes are
checked against it); ``rank_id()`` and ``collective_permute_implicit_current_processing_rank_id`` return registers
(the rank is only known at run time), usable as ``.ap(scalar_offset=...)`` or with ``nisa.register_*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nkic.frontend.affine import is_symbolic as _is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.control import VirtualRegister, new_register
from nkic.frontend.errors import NkiError
from nkic.frontend.ops import alu_op
from nkic.frontend.recorders.record import _record
from nkic.frontend.tensor import NkiTensor
from nkic.frontend.unsupported import missing_names
from nkic.target.collectives import REDUCE_OPS, format_groups, format_pairs
from nkic.target.machine import get_target
from nkic.target.vocab import HBM_MEMORIES

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
           "all_to_all_v", "collective_permute", "collective_permute_implicit", "collective_permute_implicit_reduce",
           "collective_permute_implicit_current_processing_rank_id", "rank_id"]  # fmt: skip

# "The maximum number of channels is 4 for replica groups containing all devices inside a node"
MAX_CHANNELS = 4
_PRIORITY_SINCE = 4  # "priority: DMA quality-of-service priority level 0-3 ... (NeuronCore-v4+ only)"


@dataclass(frozen=True)
class ReplicaGroup:
    """Defines a group of ranks that participate in a collective operation: lists of ranks that must not overlap
    (each rank meets the others of its own list)."""

    replica_groups: Any

    def __post_init__(self) -> None:
        groups = self.replica_groups
        if not isinstance(groups, (list, tuple)) or not groups or not all(isinstance(g, (list, tuple)) for g in groups):
            raise NkiError(f"ReplicaGroup takes a list of rank lists such as [[0, 1, 2, 3]], got {groups!r}")
        flat = [r for g in groups for r in g]
        if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in flat) or not all(groups):
            raise NkiError(f"ReplicaGroup: every list must hold ranks (ints >= 0), got {groups!r}")
        if len(set(flat)) != len(flat):
            raise NkiError(f"ReplicaGroup: sub-groups must not overlap, got {groups!r}",
                           "the reference: 'Sub-groups represented by lists of ranks should not have any overlap'")
        if len({len(g) for g in groups}) != 1:
            raise NkiError(f"ReplicaGroup: every list must have the same number of ranks, got {groups!r}",
                           "every rank runs the same program, whose shapes follow from its group's size")

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(g) for g in self.replica_groups)

    @property
    def size(self) -> int:
        return len(self.groups[0])

    def text(self) -> str:
        return format_groups(self.groups)


# -- checks shared by the collectives -----------------------------------------------------------------------------
def _group(op: str, value: Any) -> ReplicaGroup:
    if isinstance(value, ReplicaGroup):
        return value
    if isinstance(value, (list, tuple)):  # a bare list of rank lists reads as its ReplicaGroup
        return ReplicaGroup(value)
    raise NkiError(f"{op}: replica_group must be a nki.collectives.ReplicaGroup, got {type(value).__name__}")


def _tensors(op: str, role: str, value: Any) -> list[NkiTensor]:
    if isinstance(value, NkiTensor):
        raise NkiError(f"{op}: '{role}' is a list of tensors, got one tensor", f"write {role}=[tensor]")
    if not isinstance(value, (list, tuple)) or not value:
        raise NkiError(f"{op}: '{role}' must be a non-empty list of tensors, got {value!r}")
    for i, t in enumerate(value):
        if not isinstance(t, NkiTensor):
            raise NkiError(f"{op}: {role}[{i}] must be a tensor, got {type(t).__name__}")
    return list(value)


def _memory(t: NkiTensor) -> str:
    return "hbm" if str(t.buffer) in HBM_MEMORIES else str(t.buffer)


def _pairs(op: str, srcs: Any, dsts: Any, hbm_only: bool, single: bool = False) -> list[tuple[NkiTensor, NkiTensor]]:
    """The (src, dst) pairs of a collective, with the reference's memory rules."""
    s, d = _tensors(op, "srcs", srcs), _tensors(op, "dsts", dsts)
    if len(s) != len(d):
        raise NkiError(f"{op}: {len(s)} srcs but {len(d)} dsts", "give one dst per src")
    if single and len(s) != 1:
        raise NkiError(f"{op}: each list must hold exactly one tensor, got {len(s)}",
                       "coalesced collective communication is not supported for it")  # fmt: skip
    memories = {_memory(t) for t in s + d}
    if not memories <= {"hbm", "sbuf"}:
        raise NkiError(f"{op}: tensors must be in HBM or SBUF, got {', '.join(sorted(memories))}")
    if len(memories) > 1:
        raise NkiError(f"{op}: mixing memory spaces is not supported: all tensors must be on HBM or all on SBUF")
    if hbm_only and memories != {"hbm"}:
        raise NkiError(f"{op}: tensors must reside on HBM (SBUF is not supported for {op})")
    if len(s) > 1 and memories != {"hbm"}:
        raise NkiError(f"{op}: coalesced collective communication (several tensors) is only supported on HBM")
    return list(zip(s, d))


def _reduce(op: str, value: Any) -> str:
    name = alu_op(value, f"{op} op")
    if name not in REDUCE_OPS:
        raise NkiError(f"{op}: op must be nl.add, nl.minimum or nl.maximum, got {name}")
    return name


def _priority(ctx: Any, op: str, priority: Any) -> None:
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3:
        raise NkiError(f"{op}: priority must be an int 0-3 (lower is higher priority), got {priority!r}")
    if get_target(ctx.options.target).nc_version < _PRIORITY_SINCE:
        raise NkiError(f"{op}: priority is supported on NeuronCore-v4+ only", "leave priority=None")
    # nkic models no DMA quality of service: the priority is accepted and has no effect on the schedule.


def _dim(op: str, value: Any, t: NkiTensor, allowed: Sequence[int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
        where = "SBUF" if _memory(t) == "sbuf" else "HBM"
        raise NkiError(f"{op}: collective_dim must be {' or '.join(map(str, allowed))} for {where} tensors, "
                       f"got {value!r}")  # fmt: skip
    return value


def _shape(t: NkiTensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _same_dtype(op: str, src: NkiTensor, dst: NkiTensor) -> None:
    if str(src.dtype) != str(dst.dtype):
        raise NkiError(f"{op}: src is {src.dtype} but dst is {dst.dtype}", "a collective does not cast")


def _scaled(op: str, small: NkiTensor, big: NkiTensor, dim: int, n: int, what: str) -> None:
    """``big`` is ``small`` with dim ``dim`` n times as long (n the replica group's size)."""
    s, b = _shape(small), _shape(big)
    want = s[:dim] + (s[dim] * n,) + s[dim + 1:] if dim < len(s) else None
    if want is None or b != want:
        raise NkiError(f"{op}: {what}: expected shape {want} for a group of {n} ranks along dim {dim}, got {b}")


def _emit(ctx: Any, op: str, operands: dict[str, NkiTensor], attrs: dict[str, Any]) -> None:
    _record(ctx, op, operands, attrs)  # the checks every instruction gets (memories, engines, rules)


# -- the collectives ------------------------------------------------------------------------------------------------
@nki_op
def all_reduce(ctx: Any, srcs: Any, dsts: Any, replica_group: Any, op: Any, priority: Any = None,
               name: Any = None) -> None:
    """Every member's dst = ``op`` over the members' src (element-wise)."""
    what, group, red = "all_reduce", _group("all_reduce", replica_group), _reduce("all_reduce", op)
    _priority(ctx, what, priority)
    for src, dst in _pairs(what, srcs, dsts, hbm_only=False):
        _same_dtype(what, src, dst)
        if _shape(src) != _shape(dst):
            raise NkiError(f"{what}: src {_shape(src)} and dst {_shape(dst)} must have the same shape")
        _emit(ctx, what, {"dst": dst, "src": src}, {"op": red, "replica_groups": group.text()})


@nki_op
def all_gather(ctx: Any, srcs: Any, dsts: Any, replica_group: Any, collective_dim: Any, priority: Any = None,
               name: Any = None) -> None:
    """Every member's dst = the members' src concatenated along ``collective_dim``, in group order. "Currently only
    0 is supported for HBM tensors. For SBUF tensors, 0 or 1 is supported" (2-D SBUF tensors)."""
    what, group = "all_gather", _group("all_gather", replica_group)
    _priority(ctx, what, priority)
    for src, dst in _pairs(what, srcs, dsts, hbm_only=False):
        _same_dtype(what, src, dst)
        dim = _dim(what, collective_dim, src, (0, 1) if _memory(src) == "sbuf" else (0,))
        if _memory(src) == "sbuf" and len(_shape(src)) != 2:
            raise NkiError(f"{what}: SBUF collectives operate on 2-D tensors with a single free dimension, "
                           f"got {_shape(src)}")  # fmt: skip
        _scaled(what, src, dst, dim, group.size, "dst")
        _emit(ctx, what, {"dst": dst, "src": src}, {"collective_dim": dim, "replica_groups": group.text()})


@nki_op
def reduce_scatter(ctx: Any, srcs: Any, dsts: Any, replica_group: Any, collective_dim: Any, op: Any,
                   priority: Any = None, name: Any = None) -> None:
    """Member i's dst = chunk i (along ``collective_dim``; "Currently only 0 is supported") of ``op`` over the
    members' src."""
    what, group, red = "reduce_scatter", _group("reduce_scatter", replica_group), _reduce("reduce_scatter", op)
    _priority(ctx, what, priority)
    for src, dst in _pairs(what, srcs, dsts, hbm_only=False):
        _same_dtype(what, src, dst)
        dim = _dim(what, collective_dim, src, (0,))
        _scaled(what, dst, src, dim, group.size, "src")
        _emit(ctx, what, {"dst": dst, "src": src},
              {"op": red, "collective_dim": dim, "replica_groups": group.text()})


@nki_op
def all_to_all(ctx: Any, srcs: Any, dsts: Any, replica_group: Any, collective_dim: Any, priority: Any = None,
               name: Any = None) -> None:
    """Chunk j of member i's dst = chunk i of member j's src, chunks along ``collective_dim`` (only 0); HBM only."""
    what, group = "all_to_all", _group("all_to_all", replica_group)
    _priority(ctx, what, priority)
    for src, dst in _pairs(what, srcs, dsts, hbm_only=True):
        _same_dtype(what, src, dst)
        dim = _dim(what, collective_dim, src, (0,))
        if _shape(src) != _shape(dst) or _shape(src)[0] % group.size:
            raise NkiError(f"{what}: src {_shape(src)} and dst {_shape(dst)} must have one shape whose dim 0 "
                           f"divides into the group's {group.size} ranks")  # fmt: skip
        _emit(ctx, what, {"dst": dst, "src": src}, {"collective_dim": dim, "replica_groups": group.text()})


def _metadata(ctx: Any, op: str, value: Any, n: int, has_rdispls: bool) -> NkiTensor:
    """The uint32 metadata tensor: (rows, n) in HBM, (1, rows, n) in SBUF; rows 3, or 4 with has_rdispls."""
    if not isinstance(value, NkiTensor):
        raise NkiError(f"{op}: metadata_tensor must be a tensor, got {type(value).__name__}")
    rows = 4 if has_rdispls else 3
    want = (rows, n) if _memory(value) == "hbm" else (1, rows, n)
    if str(value.dtype) != "uint32" or _shape(value) != want:
        raise NkiError(f"{op}: metadata_tensor must be uint32 of shape {want} in {_memory(value).upper()}, got "
                       f"{value.dtype} {_shape(value)}")  # fmt: skip
    return value


def _v_collective(ctx: Any, what: str, srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: Any,
                  recv_counts_known: Any, has_rdispls: Any, priority: Any) -> None:
    group = _group(what, replica_group)
    _priority(ctx, what, priority)
    if has_rdispls:
        raise NkiError(f"{what}: has_rdispls=True is not supported", "lay the chunks out at equal slots")
    [(src, dst)] = _pairs(what, srcs, dsts, hbm_only=True, single=True)
    _same_dtype(what, src, dst)
    meta = _metadata(ctx, what, metadata_tensor, group.size, bool(has_rdispls))
    _emit(ctx, what, {"dst": dst, "src": src, "metadata": meta},
          {"replica_groups": group.text(), "recv_counts_known": bool(recv_counts_known), "has_rdispls": False})


@nki_op
def all_gather_v(ctx: Any, srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: Any,
                 recv_counts_known: bool = False, has_rdispls: bool = False, priority: Any = None,
                 name: Any = None) -> None:
    """Each member broadcasts ``src[send_displ : send_displ + send_count]`` (metadata rows 0/1, first column) to
    slot s of every member's flat dst (slots of ``dst.size / n`` elements); row 2 gets the received counts unless
    ``recv_counts_known``."""
    _v_collective(ctx, "all_gather_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
                  priority)


@nki_op
def all_to_all_v(ctx: Any, srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: Any,
                 recv_counts_known: bool = False, has_rdispls: bool = False, priority: Any = None,
                 name: Any = None) -> None:
    """Member s sends ``send_counts[r]`` elements from ``send_displs[r]`` of its flat src to member r, which lays
    them at slot s of its flat dst; row 2 gets the received counts unless ``recv_counts_known``."""
    _v_collective(ctx, "all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
                  priority)


@nki_op
def collective_permute(ctx: Any, srcs: Any, dsts: Any, source_target_pairs: Any, priority: Any = None,
                       name: Any = None) -> None:
    """For each ``(source, target)`` pair the target's dst = the source's src; HBM only, one tensor per list."""
    what = "collective_permute"
    _priority(ctx, what, priority)
    pairs = source_target_pairs
    if not isinstance(pairs, (list, tuple)) or not pairs or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(r, int) and r >= 0 for r in p)
            for p in pairs):  # fmt: skip
        raise NkiError(f"{what}: source_target_pairs must be a list of (source, target) rank pairs, got {pairs!r}")
    if len({p[1] for p in pairs}) != len(pairs) or len({p[0] for p in pairs}) != len(pairs):
        raise NkiError(f"{what}: each rank may send once and receive once, got {pairs!r}")
    [(src, dst)] = _pairs(what, srcs, dsts, hbm_only=True, single=True)
    _same_dtype(what, src, dst)
    if _shape(src) != _shape(dst):
        raise NkiError(f"{what}: src {_shape(src)} and dst {_shape(dst)} must have the same shape")
    _emit(ctx, what, {"dst": dst, "src": src}, {"source_target_pairs": format_pairs(pairs)})


def _channels(what: str, n: int, channel_ids: Any) -> list[int]:
    ids = list(channel_ids) if isinstance(channel_ids, (list, tuple)) else None
    if ids is None or ids != list(range(len(ids))) or len(ids) != n:
        raise NkiError(f"{what}: channel_ids must be consecutive integers from 0, one per channel ({n}), got "
                       f"{channel_ids!r}")  # fmt: skip
    if n > MAX_CHANNELS:
        raise NkiError(f"{what}: at most {MAX_CHANNELS} channels, got {n}")
    return ids


def _by_channel(what: str, role: str, value: Any) -> list[NkiTensor]:
    if not isinstance(value, (list, tuple)) or not value:
        raise NkiError(f"{what}: '{role}' must be a list (one per channel) of one-tensor lists, got {value!r}")
    out = []
    for i, inner in enumerate(value):
        ts = _tensors(what, f"{role}[{i}]", inner)
        if len(ts) != 1:
            raise NkiError(f"{what}: {role}[{i}] must contain exactly one tensor, got {len(ts)}")
        out.append(ts[0])
    return out


@nki_op
def collective_permute_implicit(ctx: Any, srcs_by_channel: Any, dsts_by_channel: Any, replica_group: Any,
                                channel_ids: Any = (0,), priority: Any = None, name: Any = None) -> None:
    """Each member sends each channel's src to its successor in its ring and receives its predecessor's into dst."""
    what, group = "collective_permute_implicit", _group("collective_permute_implicit", replica_group)
    _priority(ctx, what, priority)
    srcs, dsts = _by_channel(what, "srcs_by_channel", srcs_by_channel), _by_channel(what, "dsts_by_channel",
                                                                                      dsts_by_channel)
    if len(srcs) != len(dsts):
        raise NkiError(f"{what}: {len(srcs)} source channels but {len(dsts)} destination channels")
    for channel in _channels(what, len(srcs), list(channel_ids)):
        [(src, dst)] = _pairs(what, [srcs[channel]], [dsts[channel]], hbm_only=False)
        _same_dtype(what, src, dst)
        if _shape(src) != _shape(dst):
            raise NkiError(f"{what}: channel {channel}: src {_shape(src)} and dst {_shape(dst)} differ in shape")
        _emit(ctx, what, {"dst": dst, "src": src}, {"channel": channel, "replica_groups": group.text()})


@nki_op
def collective_permute_implicit_reduce(ctx: Any, srcs0_by_channel: Any, srcs1_by_channel: Any, dsts_by_channel: Any,
                                       replica_group: Any, op: Any, channel_ids: Any = (0,), priority: Any = None,
                                       name: Any = None) -> None:
    """Each member sends ``op(src0, src1)`` of each channel to its successor and receives its predecessor's."""
    what = "collective_permute_implicit_reduce"
    group, red = _group(what, replica_group), _reduce(what, op)
    _priority(ctx, what, priority)
    s0 = _by_channel(what, "srcs0_by_channel", srcs0_by_channel)
    s1 = _by_channel(what, "srcs1_by_channel", srcs1_by_channel)
    ds = _by_channel(what, "dsts_by_channel", dsts_by_channel)
    if not len(s0) == len(s1) == len(ds):
        raise NkiError(f"{what}: srcs0, srcs1 and dsts must have one entry per channel each")
    for channel in _channels(what, len(ds), list(channel_ids)):
        [(a, dst)] = _pairs(what, [s0[channel]], [ds[channel]], hbm_only=False)
        b = s1[channel]
        _pairs(what, [b], [dst], hbm_only=False)
        for src in (a, b):
            _same_dtype(what, src, dst)
            if _shape(src) != _shape(dst):
                raise NkiError(f"{what}: channel {channel}: a source {_shape(src)} and dst {_shape(dst)} differ")
        _emit(ctx, what, {"dst": dst, "src0": a, "src1": b},
              {"op": red, "channel": channel, "replica_groups": group.text()})


# -- rank registers -------------------------------------------------------------------------------------------------
@nki_op
def rank_id(ctx: Any, name: Any = None) -> VirtualRegister:
    """A register holding this rank's id (its index in the launch)."""
    reg = new_register(ctx)
    ctx.inst("rank_id", {}, {"dst_reg": reg.number})
    return reg


@nki_op
def collective_permute_implicit_current_processing_rank_id(ctx: Any, iteration_id: Any, replica_group: Any,
                                                            channel_id: Any = 0, name: Any = None) -> VirtualRegister:
    """A register holding the rank whose data the ring holds after ``iteration_id`` implicit permutes, as its
    position in this rank's list of the replica group: this rank at iteration 0, then its predecessor, and so on."""
    what, group = "collective_permute_implicit_current_processing_rank_id", _group("rank id", replica_group)
    for label, value, top in (("iteration_id", iteration_id, None), ("channel_id", channel_id, MAX_CHANNELS)):
        v = int(value) if not isinstance(value, bool) and hasattr(value, "__index__") or _symbolic(value) else None
        if v is None or v < 0 or (top is not None and v >= top):
            raise NkiError(f"{what}: {label} must be an int >= 0{f' and < {top}' if top else ''}, got {value!r}")
    reg = new_register(ctx)
    ctx.inst("collective_permute_implicit_current_processing_rank_id", {},
             {"dst_reg": reg.number, "iteration": int(iteration_id), "channel": int(channel_id),
              "replica_groups": group.text()})
    return reg


def _symbolic(value: Any) -> bool:
    return _is_symbolic(value)


__getattr__ = missing_names("nki.collectives")
