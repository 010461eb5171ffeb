"""``nki.collectives``: the collective instructions between ranks, declared once (ARCHITECTURE.md, "Ranks and
collectives").

A *rank* is one NeuronCore program with its own HBM view (``nki.simulate(kernel, ranks=N)``, ``nkic run --ranks``);
every rank runs the same NEFF. A collective names the ranks it spans by a *replica group* — disjoint lists of
ranks ("Sub-groups represented by lists of ranks should not have any overlap", nki.collectives.ReplicaGroup) — and
each rank meets the other members of its own list. The group is a ``str`` field (``"0,1,2,3;4,5,6,7"``: in a NEFF
an index into its string table), ``group_size`` an immediate derived from it (the cost model reads it).

Each collective is a DMA (trait ``dma``): SP triggers it on a DMA queue (SP reaches SBUF and HBM, the two memories
the reference allows) and goes on; the transfer runs when the group has met, and its completion signals the queue's
semaphore. It reads its sources and writes its destinations like any other instruction, so dependency-analysis
orders it after the writes of its sources and makes later readers and writers wait for that semaphore, and every
core issues its collectives in program order through the core state ``lnc_pipes`` (the simulator pairs the k-th
collective of each member, as it pairs the k-th sendrecv of the LNC=2 pair). ``rank_id`` and ``collective_permute_implicit_current_processing_rank_id`` write
a sequencer register (control instructions, like ``register_move``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nkic.target.costs import CONTROL_CYCLES, DMA_FIXED_NS, LNC_SYNC_NS, SP_DMA_ISSUE_CYCLES, cost
from nkic.target.instructions import LNC_PIPES, Field, InstrSpec, Role, declare, encoding
from nkic.target.isa import Imm, Instr
from nkic.target.machine import Target
from nkic.target.vocab import HBM_MEMORIES

__all__ = ["COLLECTIVE_OPCODES", "REDUCE_OPS", "format_groups", "parse_groups", "format_pairs", "parse_pairs",
           "group_of", "link_bytes_per_ns", "collective_ns"]  # fmt: skip

# "Tensors can reside on either HBM or SBUF" (all_reduce, all_gather, reduce_scatter); all_to_all,
# collective_permute and the _v forms: "Tensors must reside on HBM" / "Must be HBM-backed".
_HBM_OR_SBUF = ("sbuf", *HBM_MEMORIES)
_HBM = HBM_MEMORIES
# ":param op: The reduction operation to perform (nl.add, nl.minimum, or nl.maximum)"
REDUCE_OPS = ("add", "minimum", "maximum")
_CC_STATE = frozenset({LNC_PIPES})  # a core's meetings (sendrecv and collectives) stay in program order
_CONTROL = frozenset({"control"})
_DMA = frozenset({"dma"})


# -- replica groups and pairs as strings (a str field: the NEFF's string table) --------------------------------
def format_groups(groups: Sequence[Sequence[int]]) -> str:
    return ";".join(",".join(str(int(r)) for r in g) for g in groups)


def parse_groups(text: str) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(r) for r in g.split(",")) for g in str(text).split(";") if g)


def format_pairs(pairs: Sequence[Sequence[int]]) -> str:
    return ";".join(f"{int(s)}>{int(t)}" for s, t in pairs)


def parse_pairs(text: str) -> tuple[tuple[int, int], ...]:
    return tuple((int(p.split(">")[0]), int(p.split(">")[1])) for p in str(text).split(";") if p)


def group_of(groups: Sequence[Sequence[int]], rank: int) -> tuple[int, ...] | None:
    """The list of ``groups`` holding ``rank`` (None when it is in none)."""
    return next((tuple(g) for g in groups if rank in g), None)


def _group_size(f: Mapping[str, Any]) -> dict[str, Any]:
    if "source_target_pairs" in f:
        pairs = parse_pairs(f["source_target_pairs"])
        return {"group_size": len({r for p in pairs for r in p}) or 1}
    groups = parse_groups(f.get("replica_groups", ""))
    return {"group_size": max((len(g) for g in groups), default=1)}


_GROUPS = Field("replica_groups", "str", required=True)
_GROUP_IMMS = (Imm("replica_groups", "str"), Imm("group_size", "u32"))


def _collective(name: str, opcode: str, code: int, roles: tuple[Role, ...], doc: str, fields: tuple[Field, ...],
                imms: tuple[Imm, ...], formula: str, groups: Field = _GROUPS, flags: tuple[str, ...] = ()) -> None:
    """Declare one collective: an SP instruction of its own opcode, ordered among the core's meetings."""
    declare(
        InstrSpec(name, opcode, roles, ("sp",), doc, fields=(groups, *fields), derive=_group_size, since=2,
                  traits=_DMA, reads_state=_CC_STATE, writes_state=_CC_STATE),
        encoding(code, formula, imms=(Imm("queue", "u32"), Imm(groups.name, "str"), Imm("group_size", "u32"), *imms),
                 flags=flags),
    )


_DST, _SRC = Role("dst", write=True, memories=_HBM_OR_SBUF), Role("src", memories=_HBM_OR_SBUF)
_DST_HBM, _SRC_HBM = Role("dst", write=True, memories=_HBM), Role("src", memories=_HBM)
_OP, _DIM = Field("op", "alu", required=True), Field("collective_dim", "int")
_CHANNEL = Field("channel", "int")

# Opcodes 0x60.. : the collectives (0x57..0x5F are left to the LNC and debug instructions' neighbours).
_collective("all_reduce", "ALL_REDUCE", 0x60, (_DST, _SRC),
            "dst = op over the group's src, on every member", (_OP,), (Imm("op", "alu"),),
            "dst = reduce(op) of src over the members of this rank's replica group")
_collective("all_gather", "ALL_GATHER", 0x61, (_DST, _SRC),
            "dst = the group's src concatenated along collective_dim, in group order", (_DIM,),
            (Imm("collective_dim", "u32", default=0),),
            "dst = concat(src of each member, in group order) along collective_dim")
_collective("reduce_scatter", "REDUCE_SCATTER", 0x62, (_DST, _SRC),
            "dst = member i's chunk (along collective_dim) of op over the group's src", (_OP, _DIM),
            (Imm("op", "alu"), Imm("collective_dim", "u32", default=0)),
            "dst = chunk[position in group] of reduce(op) of src over the members, split along collective_dim")
_collective("all_to_all", "ALL_TO_ALL", 0x63, (_DST_HBM, _SRC_HBM),
            "chunk j of member i's dst = chunk i of member j's src (chunks along collective_dim)", (_DIM,),
            (Imm("collective_dim", "u32", default=0),),
            "dst chunk j = src chunk (this rank's position) of member j, chunks along collective_dim")
_META = Role("metadata", write=True, memories=_HBM_OR_SBUF)
_V_FIELDS = (Field("recv_counts_known", "bool"), Field("has_rdispls", "bool"))
_V_FLAGS = ("recv_counts_known", "has_rdispls")
_collective("all_gather_v", "ALL_GATHER_V", 0x64, (_DST_HBM, _SRC_HBM, _META),
            "each member's src[send_displ : send_displ + send_count] lands in slot s of every member's flat dst",
            _V_FIELDS, (), "flat dst[s*slot : s*slot + count_s] = flat src of member s [displ_s : displ_s + count_s]",
            flags=_V_FLAGS)
_collective("all_to_all_v", "ALL_TO_ALL_V", 0x65, (_DST_HBM, _SRC_HBM, _META),
            "member s's chunk for r (send_counts[r] elements at send_displs[r]) lands in slot s of r's flat dst",
            _V_FIELDS, (), "flat dst[s*slot : s*slot + n] = flat src of member s [displ_s[r] : displ_s[r] + n]",
            flags=_V_FLAGS)
_collective("collective_permute", "COLLECTIVE_PERMUTE", 0x66, (_DST_HBM, _SRC_HBM),
            "for each (source, target) pair: the target's dst = the source's src", (), (),
            "dst of target = src of source, for each (source, target) pair",
            groups=Field("source_target_pairs", "str", required=True))
_collective("collective_permute_implicit", "COLLECTIVE_PERMUTE_IMPLICIT", 0x67, (_DST, _SRC),
            "each member sends src to its successor in its ring and receives its predecessor's src into dst",
            (_CHANNEL,), (Imm("channel", "u32", default=0),),
            "dst = src of the predecessor in this rank's replica-group ring")
_collective("collective_permute_implicit_reduce", "COLLECTIVE_PERMUTE_IMPLICIT_REDUCE", 0x68,
            (_DST, Role("src0", memories=_HBM_OR_SBUF), Role("src1", memories=_HBM_OR_SBUF)),
            "each member sends op(src0, src1) to its successor and receives its predecessor's into dst",
            (_OP, _CHANNEL), (Imm("op", "alu"), Imm("channel", "u32", default=0)),
            "dst = op(src0, src1) of the predecessor in this rank's replica-group ring")

# The rank registers. "rank_id: Get the rank ID of the current rank"; the implicit permutes' "rank ID of the data
# to be processed in the current ring iteration": at iteration 0 "the current rank's own ID", then the rank whose
# data arrived from the predecessors, i.e. the member ``iteration`` steps back around the ring, as its position in
# its list of the group: the ID "within the collective group" (rank_id's words). nki-library's fine_grained_allgather
# indexes its (tp_degree, ...) result with it, with num_groups lists of tp_degree ranks each, so it cannot be the
# rank's index in the whole launch.
declare(
    InstrSpec("rank_id", "RANK_ID", (), ("sp",), "r[dst_reg] = the rank running this program",
              fields=(Field("dst_reg", "int", required=True),), traits=_CONTROL),
    encoding(0x69, "r[dst_reg] = this rank's id", imms=(Imm("dst_reg", "u32"),)),
)
declare(
    InstrSpec("collective_permute_implicit_current_processing_rank_id", "RING_RANK_ID", (), ("sp",),
              "r[dst_reg] = the rank whose data an implicit permute has delivered after `iteration` ring steps",
              fields=(Field("dst_reg", "int", required=True), Field("iteration", "int", required=True),
                      _CHANNEL, _GROUPS), traits=_CONTROL),
    encoding(0x6A, "r[dst_reg] = (position in group - iteration) mod size",
             imms=(Imm("dst_reg", "u32"), Imm("iteration", "u32"), Imm("channel", "u32", default=0),
                   Imm("replica_groups", "str"))),
)

COLLECTIVE_OPCODES: frozenset[str] = frozenset({
    "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL", "ALL_GATHER_V", "ALL_TO_ALL_V",
    "COLLECTIVE_PERMUTE", "COLLECTIVE_PERMUTE_IMPLICIT", "COLLECTIVE_PERMUTE_IMPLICIT_REDUCE",
})  # fmt: skip


# -- cost ---------------------------------------------------------------------------------------------------------
# NeuronLink bandwidth per chip, shared by its NeuronCores (one rank each):
# - trn2: "NeuronLink-v3 for chip-to-chip interconnect provides 1.28 TB/sec bandwidth per chip" (Neuron docs,
#   about-neuron/arch/neuron-hardware/trainium2.rst), 8 NeuronCore-v3 per chip;
# - trn3: "NeuronLink-v4 for device-to-device interconnect provides 2.56 TB/sec bandwidth per device"
#   (trainium3.rst), 8 NeuronCore-v4;
# - trn1: the docs give no figure for NeuronLink-v2 ("NeuronLink-v2 for chip-to-chip interconnect", trainium.rst).
#   Estimate: 0.384 TB/s per chip (4 NeuronLink-v2 per Trainium chip, trainium_inferentia2_arch.rst, at 96 GB/s
#   each: an assumption), 2 NeuronCore-v2 per chip.
_LINK_BYTES_PER_NS = {2: 384.0 / 2, 3: 1280.0 / 8, 4: 2560.0 / 8}  # bytes/ns (= GB/s) per NeuronCore
# Per ring step (estimate, unpublished): the collective's DMA descriptors start like a DMA (DMA_FIXED_NS) and the
# CC-core's semaphore hand-off to the peer costs a cross-core round (LNC_SYNC_NS).
STEP_LATENCY_NS = DMA_FIXED_NS + LNC_SYNC_NS


def link_bytes_per_ns(t: Target) -> float:
    return _LINK_BYTES_PER_NS[t.nc_version]


def _bytes(ins: Instr, slot: str) -> int:
    op = ins.operand(slot) if slot in ins.spec.slots else None
    return op.num_elements * op.itemsize if op is not None else 0


def collective_ns(ins: Instr, t: Target) -> float:
    """The ring algorithm's time for ``ins`` over its group of n ranks (NCCL's bus-bandwidth factors, nccl-tests
    doc/PERFORMANCE.md: all-reduce moves 2(n-1)/n of the buffer per rank, all-gather / reduce-scatter / all-to-all
    (n-1)/n of the larger buffer) in 2(n-1) or (n-1) steps of ``STEP_LATENCY_NS``; a permute is one step."""
    n = max(1, int(ins.imm("group_size")))
    size = max(_bytes(ins, "dst"), _bytes(ins, "src"), _bytes(ins, "src0"))
    if ins.opcode == "ALL_REDUCE":
        steps, moved = 2 * (n - 1), 2 * (n - 1) / n * size
    elif ins.opcode.startswith("COLLECTIVE_PERMUTE"):
        steps, moved = 1, float(_bytes(ins, "dst"))
    else:
        steps, moved = n - 1, (n - 1) / n * size
    return max(steps, 1) * STEP_LATENCY_NS + moved / link_bytes_per_ns(t)


@cost(*sorted(COLLECTIVE_OPCODES))
def _collective_issue(ins: Instr, t: Target) -> int:
    """SP triggers the collective like any DMA (``SP_DMA_ISSUE_CYCLES``); the transfer, :func:`collective_ns`, runs
    once the group has met (the simulator) while SP goes on."""
    return SP_DMA_ISSUE_CYCLES


@cost("RANK_ID", "RING_RANK_ID")
def _rank_register(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a register move, like REG_ALU."""
    return CONTROL_CYCLES
