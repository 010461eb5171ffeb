"""The public ``nki.isa`` surface is exactly its NKI names, wherever the instructions are implemented.

``nkic.frontend.isa`` is what ``import nki.isa`` gives (``alias.py``); the instructions themselves live in
``frontend/recorders/``, one module per instruction family. Moving an instruction between those modules must not
change what a kernel sees: the exported names, that each names ``nkic.frontend.isa`` as its module (the tracer
and its messages name an instruction ``nisa.<name>`` by it), and that every instruction takes ``mask=``.
"""

from __future__ import annotations

import nkic
import nkic.frontend.isa as nisa
import nkic.frontend.legacy.isa as legacy_isa
from nkic.frontend import recorders
from nkic.frontend.context import is_nki_op
from nkic.frontend.unsupported import api_names

# The names nki.isa exported before its instructions were split into families (frontend/recorders/).
EXPORTED = [
    "NkiInstruction", "NkiTensor", "NkiValidationError", "VirtualRegister", "activate2", "activation",
    "activation_reduce", "affine_select", "bn_aggr", "bn_stats", "core_barrier", "dge_mode", "dma_compute", "dma_copy",
    "dma_engine", "dma_transpose", "dropout", "engine", "exponential", "get_nc_sub_version", "get_nc_version",
    "gpsimd_engine", "iota", "local_gather", "matmul_perf_mode", "max8", "memset", "nc_find_index8",
    "nc_match_replace8", "nc_matmul", "nc_matmul_mx", "nc_n_gather", "nc_stream_shuffle", "nc_transpose", "nc_version",
    "nonzero_with_count", "oob_mode", "quantize_mx", "rand2", "rand_get_state", "rand_set_state", "range_select",
    "reciprocal", "reduce_cmd", "register_alloc", "register_load", "register_move", "register_store", "rng",
    "scalar_engine", "scalar_tensor_tensor", "select_reduce", "sendrecv", "sequence_bounds", "set_rng_seed",
    "tensor_copy", "tensor_copy_predicated", "tensor_engine", "tensor_partition_reduce", "tensor_reduce",
    "tensor_scalar", "tensor_scalar_cumulative", "tensor_scalar_reduce", "tensor_tensor", "tensor_tensor_scan", "topk",
    "unknown_engine", "vector_engine",
]  # fmt: skip


def _public(module: object) -> list[str]:
    """The module's public names, less ``constants``: once the alias is installed, ``nki.isa.constants`` is the module
    itself (``alias.py``: nki-library imports its enums from ``nki.isa.constants``)."""
    assert vars(module).get("constants", module) is module  # (getattr would answer a missing name's placeholder)
    return sorted(n for n in dir(module) if not n.startswith("_") and n != "constants")


def test_nki_isa_exports_exactly_its_names() -> None:
    assert _public(nisa) == sorted(EXPORTED)
    assert sorted(api_names(vars(nisa))) == sorted(EXPORTED)  # and each is an NKI name, not a helper import


def test_the_alias_is_this_module() -> None:
    nkic.install_nki_alias()
    import nki.isa  # noqa: PLC0415 -- the alias exists only once installed

    assert nki.isa is nisa


def test_every_instruction_is_published_under_nki_isa() -> None:
    ops = [getattr(nisa, n) for n in EXPORTED if is_nki_op(getattr(nisa, n))]
    assert {op.__name__ for op in ops} == {
        n for family in recorders.FAMILIES for n, v in vars(family).items() if is_nki_op(v)
    }
    for op in ops:
        assert op.__module__ == "nkic.frontend.isa", op.__name__
        assert getattr(op.__nki_impl__, "__nki_masked__", False), op.__name__  # wrapped by the mask handling
    assert nisa.engine.__module__ == nisa.get_nc_version.__module__ == "nkic.frontend.isa"


def test_the_legacy_surface_keeps_every_modern_name() -> None:
    assert set(EXPORTED) <= set(dir(legacy_isa))
