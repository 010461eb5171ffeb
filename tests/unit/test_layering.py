"""The layering rules, checked on the source: every import of every module of the package, read with ``ast``.

All imports count — module-level, function-local, under ``TYPE_CHECKING``, ``import nkic.x``, ``from nkic.x import
y``, relative ones, and ``importlib.import_module("...")`` with a literal name — because a function-local import is
still a dependency, only a later one. ``from P import name`` depends on the module ``P.name`` when the package has
such a module, else on ``P``.

The rules (a folder's modules never import the listed modules or packages):

* ``target/``: xDSL or any other nkic module — the target description is plain data everyone can read;
* ``dialects/``: ``runtime/``, ``frontend/``, ``passes/``, ``tools/``, ``kernels/``, ``library/``;
* ``runtime/``: xDSL, ``dialects/``, ``frontend/``, ``passes/`` — a NEFF runs without the compiler;
* ``passes/``: ``frontend/``, ``kernels/``, ``tools/``, ``library/`` — library kernels come in through
  ``passes/resolver.py`` — nor the modules above those (``compiler.driver``, ``api/``, ``interop/``);
* ``frontend/``: ``passes/``, ``runtime/``, ``driver``, ``tools/`` — the language surface does not know the
  compiler; running a kernel is ``nkic.api.execute``'s job — nor the other modules above it (``api/``,
  ``interop/``, ``library/``, ``kernels/``);
* ``support/`` (``gcpause``, ``safeio``, ``lazy``): xDSL or any nkic module — the tracer and the driver both pause the
  collector, and every layer that writes a file (the runtime, the driver, the cache, the tools) writes through safeio;
* ``hlo/`` (the StableHLO front door, beside ``frontend/``): ``passes/``, ``runtime/``, ``tools/``, ``library/``,
  ``kernels/`` nor the modules above (``compiler.driver``, ``api/``, ``interop/``) — it lowers
  through the frontend and the dialects; ``dialects/``, ``frontend/`` and ``passes/`` never import it;
* ``kernels/``: anything but the public NKI API (``nkic.api`` itself, or ``nki`` after the alias), the standard library
  and numpy — they are user-level kernels;
* ``compiler/driver.py`` (traced module -> NEFF, and running a NEFF): ``tools/``, ``kernels/``, ``hlo/`` nor the modules above
  it (``api/``, ``interop/``) — NEFF
  assembly is the backend's (``passes/neff_assembly.py``);
* the package root ``__init__.py``: any nkic module but the leaves ``version`` and ``sources`` it re-exports, and
  ``api.alias``, which ``install_nki_alias`` installs when called — importing nkic imports no sub-package;
* ``version.py``, ``sources.py``: xDSL or any nkic module (leaves);
* ``interop/common.py`` (the adapters' shared plumbing): the router ``interop`` nor either adapter — it sits below
  them; ``interop/jax.py`` and ``interop/torch.py``: the router nor each other (the router imports them);
* ``target/machine.py``, ``target/vocab.py`` (the machine and its vocabularies): the instruction declarations
  (``target.instructions``, ``target.isa``, ``target.rules``, ``target.costs``), which are stated on them.

No layer below the tools imports the package root ``nkic`` itself (its version and sources are leaves).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository root is the package nkic
_NOT_PACKAGE = ("tests", "bench", "build", "out")


def _package_files() -> list[Path]:
    files = []
    for path in sorted(ROOT.rglob("*.py")):
        top = path.relative_to(ROOT).parts[0]
        if top.startswith(".") or top in _NOT_PACKAGE or top.endswith(".egg-info"):
            continue
        files.append(path)
    return files


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["nkic", *parts])


FILES = _package_files()
MODULES = {_module_name(p) for p in FILES}


@dataclass(frozen=True)
class Import:
    file: str  # relative to the repository root
    line: int
    module: str  # absolute dotted name

    def __str__(self) -> str:
        return f"{self.file}:{self.line} imports {self.module}"


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def imports_of(path: Path) -> list[Import]:
    """Every module the package file ``path`` imports, in line order."""
    return imports_in(path.read_text(), path.relative_to(ROOT))


def imports_in(source: str, rel: Path) -> list[Import]:
    """Every module imported by ``source``, the text of the package file at ``rel`` (relative to the root); one
    entry per line and module, in line order."""
    return sorted(set(_imports(source, rel)), key=lambda i: (i.line, i.module))


def _imports(source: str, rel_path: Path) -> Iterator[Import]:
    rel = rel_path.as_posix()
    importer = _module_name(ROOT / rel_path)
    for node in ast.walk(ast.parse(source, filename=rel)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(rel, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(importer, rel_path.name == "__init__.py", node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield Import(rel, node.lineno, sub if sub in MODULES else base)
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield Import(rel, node.lineno, arg.value)


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _within(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _nkic(*names: str) -> tuple[str, ...]:
    return tuple(f"nkic.{n}" for n in names)


def _kernels_allow(module: str) -> bool:
    if module == "nkic.api" or _within(module, "nki", "__future__", "numpy"):
        return True
    return module.split(".")[0] in sys.stdlib_module_names


@dataclass(frozen=True)
class Rule:
    folder: str
    forbidden: Callable[[str], bool]


# The top-level modules above the compiler and the frontend.
_ABOVE = ("compiler.driver", "api", "interop")

def _root(m: str) -> bool:
    return m == "nkic"


_DECLARATIONS = _nkic("target.instructions", "target.isa", "target.rules", "target.costs", "target.collectives")

RULES: dict[str, Rule] = {
    "target": Rule("target", lambda m: _within(m, "xdsl") or (_within(m, "nkic") and not _within(m, "nkic.target"))),
    "dialects": Rule(
        "dialects",
        lambda m: _root(m) or _within(m, *_nkic("runtime", "frontend", "passes", "tools", "kernels", "library", "hlo")),
    ),
    "runtime": Rule("runtime", lambda m: _root(m) or _within(m, "xdsl", *_nkic("dialects", "frontend", "passes"))),
    "passes": Rule(
        "passes", lambda m: _root(m) or _within(m, *_nkic("frontend", "kernels", "tools", "library", "hlo", *_ABOVE))
    ),
    "frontend": Rule(
        "frontend",
        lambda m: _root(m) or _within(m, *_nkic("passes", "runtime", "tools", "library", "kernels", "hlo", *_ABOVE)),
    ),
    "hlo": Rule(
        "hlo", lambda m: _root(m) or _within(m, *_nkic("passes", "runtime", "tools", "library", "kernels", *_ABOVE))
    ),
    "kernels": Rule("kernels", lambda m: not _kernels_allow(m)),
    "compiler/driver.py": Rule(
        "compiler/driver.py", lambda m: _root(m) or _within(m, *_nkic("tools", "kernels", "hlo", *_ABOVE[1:]))
    ),
    "__init__.py": Rule("__init__.py", lambda m: _within(m, "nkic") and m not in _nkic("version", "sources", "api.alias")),
    "version.py": Rule("version.py", lambda m: _within(m, "xdsl", "nkic")),
    "sources.py": Rule("sources.py", lambda m: _within(m, "xdsl", "nkic")),
    "interop/common.py": Rule("interop/common.py", lambda m: m in _nkic("interop", "interop.jax", "interop.torch")),
    "interop/jax.py": Rule("interop/jax.py", lambda m: m in _nkic("interop", "interop.torch")),
    "interop/torch.py": Rule("interop/torch.py", lambda m: m in _nkic("interop", "interop.jax")),
    "target/machine.py": Rule("target/machine.py", lambda m: _within(m, *_DECLARATIONS)),
    "target/vocab.py": Rule("target/vocab.py", lambda m: _within(m, *_DECLARATIONS)),
    "support": Rule("support", lambda m: _within(m, "xdsl", "nkic")),
    # the tuner sits beside entry_points (it compiles and simulates through the driver) and below api and tools
    "api/tuning.py": Rule("api/tuning.py", lambda m: m in _nkic("api", "api.alias") or _within(
        m, *_nkic("tools", "interop", "kernels", "library", "hlo"))),
}

def violations(rule: Rule) -> list[str]:
    # A folder (or file) that does not exist (yet) simply has no files to check.
    files = [p for p in FILES if _under(p.relative_to(ROOT).as_posix(), rule.folder)]
    return [str(i) for p in files for i in imports_of(p) if rule.forbidden(i.module)]


def _under(rel: str, folder: str) -> bool:
    return rel == folder or rel.startswith(folder + "/")


@pytest.mark.parametrize("rule", list(RULES))
def test_layering_rule(rule: str) -> None:
    found = violations(RULES[rule])
    assert not found, f"{rule}/ breaks its layering rule:\n" + "\n".join(found)


def test_runtime_loads_without_xdsl() -> None:
    """Reading and simulating a NEFF needs no compiler: the runtime modules load no xDSL at all."""
    code = (
        "import nkic.runtime.neff, nkic.runtime.simulator, sys; "
        "print(any(m == 'xdsl' or m.startswith('xdsl.') for m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


@pytest.mark.parametrize(("module", "loaded"), [("nkic.tools.cli", "[]"), ("nkic.tools.info", "['numpy']")])
def test_the_command_line_loads_only_what_the_command_needs(module: str, loaded: str) -> None:
    """``nkic --help`` and usage errors load neither numpy nor the compiler (``tools/cli.py`` imports a command's
    module only to run it, so ``main`` still chooses the BLAS threading before numpy loads); ``nkic info`` and
    ``nkic cache`` read without compiling, so theirs loads no xDSL."""
    code = (
        f"import sys, {module}, nkic.tools.cli as cli; cli.build_parser().parse_args(['info', 'k.neff']); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'xdsl'}))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == loaded

def test_import_nkic_leaves_the_environment_alone() -> None:
    """Importing nkic sets no environment variables (the BLAS default belongs to the command-line entry point)."""
    code = "import json, os; before = dict(os.environ); import nkic; print(json.dumps(dict(os.environ) == before))"
    env = {"PATH": os.environ.get("PATH", "")}  # nothing else: whatever nkic would set stands out
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "true"


# -- the frontend's own layers ------------------------------------------------------------------------------
# Bottom up (ARCHITECTURE.md, "Layers"): the tensor/view model and what it is built on, the instruction recorders,
# the tracer, the language surface. A frontend module imports no frontend module of a layer above its own, and the
# frontend's import graph (every import, function-local ones too) has no cycle, so within a layer too each module
# sits above the ones it imports.
FRONTEND_LAYERS: dict[str, tuple[str, ...]] = {  # layer -> its modules (a package: all of it); "model": the rest
    "recorders": _nkic("frontend.recorders"),
    "tracer": _nkic("frontend.trace_context", "frontend.tracer"),
    "surface": _nkic("frontend", "frontend.isa", "frontend.tiles", "frontend.language", "frontend.collectives",
                     "frontend.compiler", "frontend.nki_typing", "frontend.legacy.isa", "frontend.legacy.language",
                     "frontend.legacy.compiler"),
}
_LAYER_ORDER = ["model", *FRONTEND_LAYERS]


def frontend_layer(module: str) -> str | None:
    """The frontend layer of ``module`` (None: not a frontend module)."""
    if not _within(module, "nkic.frontend"):
        return None
    for layer, members in FRONTEND_LAYERS.items():
        if any(module == m or (m != "nkic.frontend" and module.startswith(m + ".")) for m in members):
            return layer
    return "model"


def _frontend_files() -> list[Path]:
    return [p for p in FILES if _under(p.relative_to(ROOT).as_posix(), "frontend")]


def frontend_layer_violations(layer: str) -> list[str]:
    rank = _LAYER_ORDER.index(layer)
    found = []
    for path in _frontend_files():
        if frontend_layer(_module_name(path)) != layer:
            continue
        for imp in imports_of(path):
            target = frontend_layer(imp.module)
            if target is not None and _LAYER_ORDER.index(target) > rank:
                found.append(f"{imp} (the {target} layer, above {layer})")
    return found


@pytest.mark.parametrize("layer", _LAYER_ORDER)
def test_frontend_layer(layer: str) -> None:
    found = frontend_layer_violations(layer)
    assert not found, f"the frontend's {layer} layer imports a layer above it:\n" + "\n".join(found)


def frontend_cycle() -> list[str]:
    """A cycle of imports among the frontend's modules, as the modules around it ([] if there is none)."""
    graph: dict[str, set[str]] = {}
    for path in _frontend_files():
        graph[_module_name(path)] = {i.module for i in imports_of(path) if frontend_layer(i.module) is not None}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[module] = 2
        return []

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return []


def test_frontend_imports_have_no_cycle() -> None:
    cycle = frontend_cycle()
    assert not cycle, "the frontend imports in a cycle: " + " -> ".join(cycle)


def test_the_model_gets_what_the_layers_above_lend_it_whichever_module_loads_first() -> None:
    """``t[key] = value`` and ``t.broadcast_to`` are lent to the tensor model by the recorders and ``tiles.py`` when
    they load; importing the model alone (a fresh process) loads them too, through ``frontend/__init__.py``."""
    code = "import nkic.frontend.tensor as t; print(t.ASSIGN is not None and t.BROADCAST_TO is not None)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "True"


# -- the checker itself ---------------------------------------------------------------------------------------
def test_checker_sees_every_kind_of_import() -> None:
    probe = Path("passes") / "_probe.py"  # checked as if it were this package file
    source = (
        "import nkic.tools.cli\n"
        "from nkic.frontend import tracer\n"
        "from ..kernels import softmax\n"
        "from . import resolver\n"
        "from nkic import __version__\n"
        "def f():\n"
        "    from nkic import library\n"
        "    import importlib\n"
        "    importlib.import_module('nkic.kernels.matmul')\n"
    )
    found = imports_in(source, probe)
    assert [str(i) for i in found] == [
        "passes/_probe.py:1 imports nkic.tools.cli",
        "passes/_probe.py:2 imports nkic.frontend.tracer",
        "passes/_probe.py:3 imports nkic.kernels.softmax",
        "passes/_probe.py:4 imports nkic.passes.resolver",
        "passes/_probe.py:5 imports nkic",
        "passes/_probe.py:7 imports nkic.library",
        "passes/_probe.py:8 imports importlib",
        "passes/_probe.py:9 imports nkic.kernels.matmul",
    ]
    assert [i.module for i in found if RULES["passes"].forbidden(i.module)] == [
        "nkic.tools.cli", "nkic.frontend.tracer", "nkic.kernels.softmax", "nkic", "nkic.library", "nkic.kernels.matmul",
    ]  # fmt: skip
    inner = imports_in("from .. import encoding\nfrom .base import X\n", Path("runtime") / "sub" / "__init__.py")
    assert [i.module for i in inner] == ["nkic.runtime.encoding", "nkic.runtime.sub.base"]


def test_every_bundled_kernel_uses_only_the_public_api() -> None:
    kernels = [p for p in FILES if p.relative_to(ROOT).parts[0] == "kernels" and p.name != "__init__.py"]
    assert {p.stem for p in kernels} >= {"flash_attention", "matmul", "rmsnorm", "softmax", "tensor_add"}
    for path in kernels:
        modules = {i.module for i in imports_of(path)}
        assert "nkic.api" in modules, f"{path.name} does not import the public NKI module"
        assert all(_kernels_allow(m) for m in modules), f"{path.name}: {sorted(modules)}"
