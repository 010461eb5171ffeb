"""The collectives' effects in the simulator (ARCHITECTURE.md, "Ranks and collectives").

The scheduler (``scheduler._Scheduler``) makes a core's k-th collective wait until every member of its replica
group has posted its own k-th (the LNC=2 pair's meeting machinery, keyed per program index of the rank's launch);
then :func:`meet` checks that the members agree (one collective, one replica group, one size: a mismatch the trace
could not see is a ``SimulationError``) and applies it to every member's memory at once — every source is read
before any destination is written, so a collective in place works. Data move as raw bytes (a gather or permute is
bit-exact); a reduction adds in float32 in the group's rank order, then rounds once to the destination dtype.

Core numbering: rank r's program i is scheduler core ``r * programs + i``; ``_Core.rank`` / ``.ranks`` / ``.pair``
say which (``runtime/ranks.py`` sets them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from nkic.runtime.errors import SimulationError
from nkic.runtime.exec_control import _set_reg
from nkic.runtime.executors import Operands, _value, _view, execute
from nkic.runtime.state import _Core, _Engine, _View
from nkic.target.collectives import collective_ns, group_of, parse_groups, parse_pairs
from nkic.target.isa import Instr
from nkic.target.machine import Target

__all__ = ["peers", "meet", "meeting_line", "member_ranks", "transfer_ns"]

_REDUCE = {"add": np.add, "minimum": np.minimum, "maximum": np.maximum}
_PAIRS = "source_target_pairs"


def _name(ins: Instr) -> str:
    return ins.opcode.lower()


def _group_prop(ins: Instr) -> str:
    """The immediate naming ``ins``'s members: collective_permute's explicit ``source_target_pairs``, else its
    ``replica_groups`` (the declarations in target/collectives.py say which one each opcode has)."""
    return _PAIRS if any(imm.prop == _PAIRS for imm in ins.spec.imms) else "replica_groups"


def _string(core: _Core, ins: Instr, prop: str) -> str:
    index = ins.imm(prop)
    if index >= len(core.strings):
        raise SimulationError(f"{_name(ins)}: {prop} string {index} is not in the NEFF's string table")
    return core.strings[index]


def member_ranks(core: _Core, ins: Instr) -> tuple[int, ...]:
    """The ranks ``core``'s collective meets, in group order: its list of the replica group, or, for a
    collective_permute, itself and the ranks it sends to and receives from."""
    if _group_prop(ins) == _PAIRS:
        pairs = parse_pairs(_string(core, ins, _PAIRS))
        me = core.rank
        ranks: tuple[int, ...] = tuple(sorted({me, *(t for s, t in pairs if s == me), *(s for s, t in pairs if t == me)}))
    else:
        groups = parse_groups(_string(core, ins, "replica_groups"))
        found = group_of(groups, core.rank)
        if found is None:
            raise SimulationError(f"rank {core.rank} runs {_name(ins)} with replica group {list(map(list, groups))}, "
                                  "which does not include it")  # fmt: skip
        ranks = found
    beyond = [r for r in ranks if r >= core.ranks]
    if beyond:
        raise SimulationError(f"rank {core.rank} {_name(ins)} names rank {beyond[0]}, but the launch has "
                              f"{core.ranks} rank(s)")  # fmt: skip
    return ranks


def _core_of(cores: Sequence[_Core], core: int, rank: int) -> int:
    """The scheduler index of ``rank``'s program with ``core``'s program index."""
    c = cores[core]
    return rank * len(c.pair) + c.index


def peers(cores: Sequence[_Core], core: int, ins: Instr) -> tuple[int, ...]:
    return tuple(_core_of(cores, core, r) for r in member_ranks(cores[core], ins))


# -- the meeting ------------------------------------------------------------------------------------------------
def _agree(cores: Sequence[_Core], posts: Mapping[int, Instr], k: int) -> None:
    """The members run one collective over one group with one size (each rank may run a NEFF of its own)."""
    first_core = min(posts)
    first = posts[first_core]

    def describe(c: int, ins: Instr) -> str:
        ops = [ins.operand(s) for s in ins.spec.slots]
        sizes = "x".join(f"{op.num_elements} {op.dtype}" for op in ops if op is not None)
        group = _string(cores[c], ins, _group_prop(ins))
        return f"rank {cores[c].rank} runs {_name(ins)} over [{group}] ({sizes})"

    want = describe(first_core, first)
    for c, ins in posts.items():
        got = describe(c, ins)
        if got.split(" runs ", 1)[1] != want.split(" runs ", 1)[1] and _group_prop(ins) != _PAIRS:
            raise SimulationError(f"collective #{k} does not match across ranks: {want}; {got}")


def meet(cores: Sequence[_Core], posts: Mapping[int, Instr], k: int, timing_only: bool) -> None:
    """Apply the collective every core of ``posts`` (scheduler index -> its instruction) has reached."""
    _agree(cores, posts, k)
    if timing_only:
        return
    opcode = posts[min(posts)].opcode
    by_rank = {cores[c].rank: (cores[c], ins) for c, ins in posts.items()}
    _APPLY[opcode](by_rank)


Members = Mapping[int, tuple[_Core, Instr]]


def _group(by_rank: Members) -> list[int]:
    core, ins = next(iter(by_rank.values()))
    return list(member_ranks(core, ins))


def _src(by_rank: Members, rank: int, slot: str = "src") -> _View:
    core, ins = by_rank[rank]
    return _view(core, ins, slot)


def _dst(by_rank: Members, rank: int, slot: str = "dst") -> _View:
    core, ins = by_rank[rank]
    return _view(core, ins, slot)


def _reduced(by_rank: Members, group: list[int]) -> np.ndarray:
    op = _REDUCE[str(_value(by_rank[group[0]][1], "op"))]
    total = _src(by_rank, group[0]).f32()
    for r in group[1:]:
        total = op(total, _src(by_rank, r).f32())
    return total


def _all_reduce(by_rank: Members) -> None:
    group = _group(by_rank)
    total = _reduced(by_rank, group)
    for r in group:
        _dst(by_rank, r).store(total)


def _concat(parts: list[np.ndarray], view: _View, dim: int) -> np.ndarray:
    """Concatenate (nparts, free) tiles along ``dim``: an SBUF tile's partitions (0) or free elements (1); an HBM
    tensor's dim 0 is its flat row-major order."""
    if view.op.memory != "hbm":
        return np.concatenate(parts, axis=dim)
    return np.concatenate([p.reshape(-1) for p in parts])


def _all_gather(by_rank: Members) -> None:
    group = _group(by_rank)
    src = _src(by_rank, group[0])
    dim = int(_value(by_rank[group[0]][1], "collective_dim"))
    gathered = _concat([_src(by_rank, r).raw() for r in group], src, dim)
    for r in group:
        _dst(by_rank, r).store_raw(gathered)


def _chunks(values: np.ndarray, view: _View, n: int) -> list[np.ndarray]:
    """n equal chunks along dim 0: SBUF partitions, or an HBM tensor's flat row-major order."""
    flat = values if view.op.memory != "hbm" else values.reshape(-1)
    if flat.shape[0] % n:
        raise SimulationError(f"{flat.shape[0]} rows do not split into {n} equal chunks")
    return np.split(flat, n)


def _reduce_scatter(by_rank: Members) -> None:
    group = _group(by_rank)
    total = _reduced(by_rank, group)
    for i, chunk in enumerate(_chunks(total, _src(by_rank, group[0]), len(group))):
        _dst(by_rank, group[i]).store(chunk)


def _all_to_all(by_rank: Members) -> None:
    group = _group(by_rank)
    n = len(group)
    chunks = [_chunks(_src(by_rank, r).raw(), _src(by_rank, r), n) for r in group]
    for i, r in enumerate(group):
        _dst(by_rank, r).store_raw(np.concatenate([chunks[j][i].reshape(-1) for j in range(n)]))


def _collective_permute(by_rank: Members) -> None:
    core, ins = next(iter(by_rank.values()))
    sent = {s: _src(by_rank, s).raw().copy() for s, t in parse_pairs(_string(core, ins, "source_target_pairs"))
            if s in by_rank and t in by_rank}  # fmt: skip
    for s, t in parse_pairs(_string(core, ins, "source_target_pairs")):
        if s in sent:
            _dst(by_rank, t).store_raw(sent[s])


def _ring(by_rank: Members, value: Callable[[int], np.ndarray], raw: bool) -> None:
    """Each member's dst = ``value(predecessor)`` (all read before any is written): raw bytes, or float32 results
    rounded to dst's dtype."""
    group = _group(by_rank)
    sent = {r: value(r) for r in group}
    for i, r in enumerate(group):
        dst = _dst(by_rank, r)
        (dst.store_raw if raw else dst.store)(sent[group[i - 1]])


def _permute_implicit(by_rank: Members) -> None:
    _ring(by_rank, lambda r: _src(by_rank, r).raw().copy(), raw=True)


def _permute_implicit_reduce(by_rank: Members) -> None:
    def reduced(r: int) -> np.ndarray:
        op = _REDUCE[str(_value(by_rank[r][1], "op"))]
        return op(_src(by_rank, r, "src0").f32(), _src(by_rank, r, "src1").f32())

    _ring(by_rank, reduced, raw=False)


def _metadata(by_rank: Members, rank: int, n: int) -> tuple[_View, np.ndarray]:
    view = _src(by_rank, rank, "metadata")
    return view, view.raw().reshape(-1, n).astype(np.int64)


def _place(by_rank: Members, r: int, chunks: list[np.ndarray]) -> None:
    """Write sender s's chunk at slot s of r's flat dst (slots of dst.size / n elements); row 2 of r's metadata gets
    the received counts unless recv_counts_known."""
    n = len(chunks)
    dst = _dst(by_rank, r)
    flat = dst.raw().reshape(-1).copy()
    slot = flat.size // n
    for s, chunk in enumerate(chunks):
        if chunk.size > slot:
            raise SimulationError(f"rank {r} receives {chunk.size} elements from member {s}, more than its "
                                  f"{slot}-element slot")  # fmt: skip
        flat[s * slot: s * slot + chunk.size] = chunk
    dst.store_raw(flat)
    core, ins = by_rank[r]
    if not ("recv_counts_known" in ins.spec.flags and ins.flag("recv_counts_known")):
        view, meta = _metadata(by_rank, r, n)
        meta[2] = [c.size for c in chunks]
        view.store_raw(meta.astype(np.uint32).reshape(view.nparts, view.free))


def _take(by_rank: Members, s: int, count: int, displ: int) -> np.ndarray:
    flat = _src(by_rank, s).raw().reshape(-1)
    if count < 0 or displ < 0 or displ + count > flat.size:
        raise SimulationError(f"rank {s} sends elements [{displ}, {displ + count}) of a {flat.size}-element src")
    return flat[displ: displ + count].copy()


def _all_gather_v(by_rank: Members) -> None:
    group = _group(by_rank)
    n = len(group)
    sent = []
    for s in group:
        meta = _metadata(by_rank, s, n)[1]
        sent.append(_take(by_rank, s, int(meta[0, 0]), int(meta[1, 0])))  # "only the first column is read"
    for r in group:
        _place(by_rank, r, sent)


def _all_to_all_v(by_rank: Members) -> None:
    group = _group(by_rank)
    n = len(group)
    metas = {s: _metadata(by_rank, s, n)[1] for s in group}
    sent = {s: [_take(by_rank, s, int(metas[s][0, j]), int(metas[s][1, j])) for j in range(n)] for s in group}
    for j, r in enumerate(group):
        _place(by_rank, r, [sent[s][j] for s in group])


_APPLY = {
    "ALL_REDUCE": _all_reduce, "ALL_GATHER": _all_gather, "REDUCE_SCATTER": _reduce_scatter,
    "ALL_TO_ALL": _all_to_all, "ALL_GATHER_V": _all_gather_v, "ALL_TO_ALL_V": _all_to_all_v,
    "COLLECTIVE_PERMUTE": _collective_permute, "COLLECTIVE_PERMUTE_IMPLICIT": _permute_implicit,
    "COLLECTIVE_PERMUTE_IMPLICIT_REDUCE": _permute_implicit_reduce,
}  # fmt: skip


def meeting_line(cores: Sequence[_Core], engines: Sequence[_Engine], posts: Mapping[int, tuple], k: int, core: int,
                 ins: Instr) -> str:
    """``rank 0 all_reduce #1 (replica group [0,1,2,3]) waits for rank 3, which has finished its streams without
    reaching it``: one waiting member of a collective that can never complete."""
    c = cores[core]
    missing = [p for p in peers(cores, core, ins) if p not in posts]
    waits = []
    for p in missing:
        done = all(e.done for e in engines if e.core == p)
        state = "has finished its streams" if done else "is stuck elsewhere"
        waits.append(f"rank {cores[p].rank}, which {state} without reaching collective #{k}")
    group = _string(c, ins, _group_prop(ins))
    source = getattr(c, "sources", {}).get(ins.inst_id)  # the kernel line, when the NEFF carries its sources
    at = f" at {source[0]}" if source else ""
    return (f"  rank {c.rank} waits at its {_name(ins)} (collective #{k}{at}, inst_id {ins.inst_id}, group "
            f"[{group}]) for " + "; ".join(waits or ["the ranks its partners wait for"]))


# -- the rank registers -------------------------------------------------------------------------------------------
@execute("RANK_ID")
def _exec_rank_id(core: _Core, ins: Instr, ops: Operands) -> None:
    _set_reg(core, ins, "dst_reg", core.rank)


@execute("RING_RANK_ID")
def _exec_ring_rank_id(core: _Core, ins: Instr, ops: Operands) -> None:
    """The member ``iteration`` steps back around this rank's ring (each step hands data to the successor), as
    its position in the rank's list of the replica group (target/collectives.py says why)."""
    groups = parse_groups(_string(core, ins, "replica_groups"))
    group = group_of(groups, core.rank)
    if group is None:
        raise SimulationError(f"rank {core.rank} is not in replica group {list(map(list, groups))}")
    pos = group.index(core.rank)
    _set_reg(core, ins, "dst_reg", (pos - int(ins.imm("iteration"))) % len(group))


@execute(*sorted(set(_APPLY)))
def _exec_collective(core: _Core, ins: Instr, ops: Operands) -> None:
    """A collective has no effect of one core alone: the scheduler applies it when its group meets (:func:`meet`)
    and never calls this; run one instruction at a time (``simulate_in_order``) it is an error, as SENDRECV is."""
    raise SimulationError(f"{_name(ins)} runs when its replica group meets; it has no one-core, in-order meaning")


def transfer_ns(ins: Instr, target: Target) -> float:
    """How long the met collective moves data (target/collectives.py ``collective_ns``), as a SimulationError when
    the record is malformed."""
    try:
        return collective_ns(ins, target)
    except (ValueError, KeyError) as e:
        raise SimulationError(f"{_name(ins)} (inst_id {ins.inst_id}): {e}") from None
