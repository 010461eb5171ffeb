"""Every name of the NKI API reference resolves in nkic; the ones nkic lacks are placeholders that raise at call time.

The reference is the public stub package of the Neuron SDK (``aws-neuron-sdk/nki/api/nki/``), read by path from the
``shared/corpus`` folder beside the checkout; the reference-driven tests skip when it is absent.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.unsupported import Unsupported, is_unsupported  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "api" / "nki"
MODULES = {"nki": "__init__.py", "nki.language": "language/__init__.py", "nki.isa": "isa/__init__.py"}


def reference_names(relpath: str) -> list[str]:
    """The public top-level names a reference stub module defines (functions, classes, assignments)."""
    tree = ast.parse((REFERENCE / relpath).read_text())
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the NKI API reference is not in ../shared/corpus")
@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_reference_name_resolves(module: str) -> None:
    mod = sys.modules[module]
    names = reference_names(MODULES[module])
    assert len(names) > (1 if module == "nki" else 30)
    missing = [n for n in names if getattr(mod, n, None) is None]
    assert not missing
    for name in names:
        value = getattr(mod, name)
        if is_unsupported(value):
            assert value.qualname == f"{module}.{name}"
            with pytest.raises(NkiError, match=rf"test_api_names\.py:\d+: error: {module}\.{name} is not supported"):
                value()


def test_placeholders_import_and_work_as_table_entries() -> None:
    from nki.isa import no_such_instruction  # never fails at import
    from nki.language import no_such_function

    assert isinstance(no_such_instruction, Unsupported) and nisa.no_such_instruction is no_such_instruction
    table = {no_such_function: "f", nl.add: no_such_instruction}  # module-level tables stay buildable
    assert table[nl.no_such_function] == "f" and table[nl.add] is nisa.no_such_instruction
    assert is_unsupported(nisa.no_such_enum.member) and is_unsupported(nki.compiler.no_such_option)
    assert is_unsupported(nki.typing.no_such_type) and is_unsupported(nki.collectives.no_such_collective)
    with pytest.raises(AttributeError):
        nl.__no_such_dunder__  # noqa: B018  # import machinery and inspect keep their AttributeError
    assert not isinstance(nl.sbuf, nl.NoSuchClass) and not issubclass(int, nisa.NoSuchClass)

    class Derived(nisa.NoSuchBase):  # a module-level subclass of a missing class still imports
        pass

    with pytest.raises(NkiError, match="nki.isa.NoSuchBase is not supported by nkic"):
        Derived()


def test_placeholder_called_in_a_kernel_names_the_kernel_line() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.no_such_instruction(dst=out, data=x)
        return out

    with pytest.raises(NkiError) as e:
        k.trace(np.zeros((128, 4), np.float32))
    line = k.func.__code__.co_firstlineno + 3
    assert str(e.value).startswith(f"{__file__}:{line}: error: nki.isa.no_such_instruction is not supported by nkic")


def test_dtype_is_a_type() -> None:
    def helper(x: nki.dtype, y: nl.dtype = nl.bfloat16) -> nl.dtype:  # annotations evaluate at definition
        return x

    assert helper(nl.float32) == "float32"
    assert isinstance(nl.float32, nki.dtype) and isinstance(nl.bfloat16, nl.dtype) and nl.dtype is nki.dtype
    assert not isinstance("hello", nl.dtype) and not isinstance(np.float32, nl.dtype)
    assert nl.float32 == "float32" and str(nl.float32) == "float32" and {nl.float32: 1}["float32"] == 1

    @nki.jit
    def k(x):
        assert isinstance(x.dtype, nl.dtype) and x.dtype == nl.float32
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    k.trace(np.zeros((4, 4), np.float32))


def test_nc_version_is_ordered() -> None:
    assert nisa.get_nc_version() >= nisa.nc_version.gen3
    assert nisa.nc_version.gen2 < nisa.nc_version.gen3 < nisa.nc_version.gen4
    assert max(nisa.nc_version) is nisa.nc_version.gen4 and nisa.nc_version.gen3 != 3
    with pytest.raises(TypeError):
        nisa.nc_version.gen3 < 4  # noqa: B015  # ordered among generations only, like any Enum vs int


def test_nkiobject_dataclass_positional_and_keyword() -> None:
    @dataclasses.dataclass
    class ShardInfo(nl.NKIObject):  # nki-library's mlp_cte_sharding builds ShardInfo(sharded_dim, shards)
        sharded_dim: int
        shards: list

    assert ShardInfo(1, [2]) == ShardInfo(sharded_dim=1, shards=[2]) == ShardInfo(1, shards=[2])

    @dataclasses.dataclass(frozen=True)
    class Frozen(nl.NKIObject):
        a: int
        b: int = 2

    assert (Frozen(1).b, Frozen(1, 3).b, Frozen(a=4).a) == (2, 3, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Frozen(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError, match="multiple values"):
        Frozen(1, a=1)
    with pytest.raises(TypeError, match="positional"):
        Frozen(1, 2, 3)

    class Plain(nl.NKIObject):  # plain class attributes, no decorator
        x = 1
        y = 2

    assert Plain(5) == Plain(x=5, y=2) and Plain(5, 6).y == 6


def test_buffers_hbm_is_private_hbm() -> None:
    assert nl.hbm == nl.private_hbm and hash(nl.hbm) == hash(nl.private_hbm) and nl.hbm != nl.shared_hbm
    assert nl.is_hbm(nl.hbm) and nl.is_hbm(nl.shared_hbm) and not nl.is_hbm(nl.sbuf)


def test_memory_region_is_the_type_of_the_buffers() -> None:
    members = list(nl.MemoryRegion)
    assert members == [nl.sbuf, nl.psum, nl.private_hbm, nl.shared_hbm] and len(nl.MemoryRegion) == 4
    assert [m.value for m in members] == ["sbuf", "psum", "private_hbm", "shared_hbm"]
    assert nl.MemoryRegion.sbuf is nl.sbuf and nl.MemoryRegion("psum") is nl.psum
    assert nl.MemoryRegion["shared_hbm"] is nl.shared_hbm and nl.MemoryRegion(nl.hbm) is nl.hbm
    assert all(isinstance(b, nl.MemoryRegion) for b in (nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, nl.shared_hbm))
    assert nl.hbm.value == "private_hbm" and nl.hbm == nl.MemoryRegion.private_hbm  # hbm is an alias
    assert not isinstance("sbuf", nl.MemoryRegion) and nl.sbuf in nl.MemoryRegion
    with pytest.raises(ValueError, match="not a valid MemoryRegion"):
        nl.MemoryRegion("dram")

    def annotated(buffer: nl.MemoryRegion = nl.sbuf) -> nl.MemoryRegion:  # usable in annotations and defaults
        return buffer

    assert annotated() is nl.sbuf


@pytest.mark.parametrize("name", ["gelu_dx", "gelu_apprx_sigmoid_dx", "silu_dx", "erf_dx", "fmod", "average",
                                  "prelu", "MemoryRegion"])  # fmt: skip
def test_formerly_missing_language_names_are_real(name: str) -> None:
    value = getattr(nl, name)
    assert not is_unsupported(value) and callable(value)


def test_activate2_is_real() -> None:
    assert not is_unsupported(nisa.activate2) and nisa.activate2.__name__ == "activate2"
