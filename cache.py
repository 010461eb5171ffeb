"""A content-addressed NEFF cache on disk: ``NKIC_CACHE_DIR`` (off when unset or empty).

A NEFF is stored under the SHA-256 of everything its bytes depend on, so a hit never needs checking against the
kernel (``key``):

* the kernel's source: its qualified name and the text of its module's file and of every file that module imports
  (its import statements, function-local ones included, and the modules of the functions and classes in its
  globals), transitively — helpers and constants in other files count; the standard library and installed packages
  do not (an upgrade of numpy does not change the NEFF);
* the arguments: each array's name, shape and dtype and each constant's value (``Kernel.specialization``, what the
  trace cache uses), and the launch grid;
* the options (``@nki.jit(...)``: target, carrier format, allocator, the tolerated extras);
* the compiler: ``nkic.__version__`` and the digest of nkic's own source files, so an edited checkout misses.

A kernel whose key cannot be computed reproducibly (no source file, a constant without a value-based key such as an
unhashable object) is not cached. An entry is ``MAGIC + sha256(neff) + neff``, written to a temporary file and
renamed into place, so a reader sees a whole entry or none; an entry that fails its checksum (truncated, edited) is
ignored, deleted and rebuilt.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import hashlib
import importlib.util
import os
import sys
import sysconfig
import tempfile
import types
from pathlib import Path
from typing import Any

import nkic
from nkic.frontend.tracer import Kernel

CACHE_DIR_ENV = "NKIC_CACHE_DIR"
MAGIC = b"NKIC-NEFF-CACHE-1\n"
_PACKAGE = Path(nkic.__file__).resolve().parent
_NOT_PACKAGE = ("tests", "bench", "build", "out")


class Uncacheable(Exception):
    """The key of this compile cannot be computed reproducibly."""


def cache_dir() -> Path | None:
    """The cache folder, or None when the cache is off."""
    value = os.environ.get(CACHE_DIR_ENV, "")
    return Path(value) if value else None


def _in_compiler(path: Path) -> bool:
    """Whether ``path`` (resolved) is one of nkic's own source files, the ones ``compiler_digest`` covers; the
    checkout's tests, benchmarks and build folders are not, so kernels there key by their own text."""
    try:
        rel = path.relative_to(_PACKAGE)
    except ValueError:
        return False
    return rel.parts[0] not in _NOT_PACKAGE and not rel.parts[0].startswith(".")


@functools.cache
def compiler_digest() -> str:
    """nkic's version and the SHA-256 of its own source files (read once per process)."""
    h = hashlib.sha256(nkic.__version__.encode())
    for path in sorted(p for p in _PACKAGE.rglob("*.py") if _in_compiler(p)):
        h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib"))


def _user_file(module: types.ModuleType | None, roots: tuple[str, ...]) -> str | None:
    """The module's source file if it is user code: not nkic (``compiler_digest`` covers it), not installed."""
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py"):
        return None
    real = os.path.realpath(file)
    if real.startswith(roots) or _in_compiler(Path(real)):
        return None
    return real


def _imported_names(module: types.ModuleType) -> list[str]:
    """Every module the source of ``module`` imports, function-local imports included (read with ``ast``): a value
    imported by name (``from helper import FACTOR``) is invisible in the module's globals."""
    try:
        tree = ast.parse(Path(module.__file__).read_bytes())  # type: ignore[arg-type]
    except (OSError, SyntaxError, ValueError):
        return []
    package = getattr(module, "__package__", None) or ""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*parts, *([base] if base else [])])
            names += [base, *(f"{base}.{a.name}" for a in node.names)]
    return [n for n in names if n]


def _find_module(name: str) -> types.ModuleType | None:
    """The loaded module ``name``, else a stand-in carrying the file ``find_spec`` locates (None if neither)."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    stand_in = types.ModuleType(name)
    stand_in.__file__ = spec.origin
    stand_in.__package__ = spec.parent
    return stand_in


def source_files(kernel: Kernel) -> list[str]:
    """The kernel's module file and every user file reachable from it through module globals, sorted (a kernel
    bundled with nkic has none of its own: ``compiler_digest`` covers it)."""
    roots = _installed_roots()
    start = sys.modules.get(kernel.func.__module__)
    if start is None or not str(getattr(start, "__file__", None) or "").endswith(".py"):
        raise Uncacheable(f"kernel '{kernel.name}' has no source file")
    first = _user_file(start, roots)
    seen: dict[str, types.ModuleType] = {first: start} if first is not None else {}
    todo = [start]
    while todo:
        module = todo.pop()
        reached = [_find_module(name) for name in _imported_names(module)]
        for value in list(vars(module).values()):  # also what was bound without an import statement
            owner = getattr(value, "__module__", None)
            reached.append(value if isinstance(value, types.ModuleType) else sys.modules.get(owner or ""))
        for target in reached:
            file = _user_file(target, roots)
            if file is not None and file not in seen:
                seen[file] = target  # type: ignore[assignment]
                todo.append(target)  # type: ignore[arg-type]
    return sorted(seen)


def _stable(value: Any) -> str:
    """A text form of a specialization key that is the same in every process (no ids, no addresses)."""
    if isinstance(value, type):
        return f"<{value.__module__}.{value.__qualname__}>"
    if isinstance(value, enum.Enum):
        return f"<{_stable(type(value))}.{value.name}>"
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "id" and type(value[1]) is int:
        # constant_key's fallback for an unhashable object: its identity, which no other process can reproduce
        raise Uncacheable("a constant argument without a value-based key")
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_stable(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={_stable(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{_stable(type(value))}({fields})"
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    text = repr(value)
    if " at 0x" in text or " object at " in text:
        raise Uncacheable(f"a constant argument without a reproducible form ({text[:60]})")
    return f"{_stable(type(value))}:{text}"


def key(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], variant: str = "") -> str:
    """The cache key of compiling ``kernel(*args, **kwargs)``; raises Uncacheable. ``variant`` names compiler
    settings that change the code and are not kernel options (``roll-loops``); empty, it adds nothing."""
    grid, options, spec = kernel.specialization(*args, **kwargs)
    h = hashlib.sha256(b"nkic-neff\0" + compiler_digest().encode())
    h.update(f"\0{kernel.func.__module__}.{kernel.func.__qualname__}\0".encode())
    for file in source_files(kernel):
        h.update(file.encode() + b"\0" + Path(file).read_bytes() + b"\0")
    h.update(_stable((grid, options, spec)).encode())
    if variant:
        h.update(b"\0variant\0" + variant.encode())
    return h.hexdigest()


def _entry(directory: Path, digest: str) -> Path:
    return directory / digest[:2] / f"{digest}.neff"


def load(directory: Path, digest: str) -> bytes | None:
    """The cached NEFF for ``digest``, or None (absent, or corrupt: then the entry is deleted)."""
    path = _entry(directory, digest)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, check, neff = data[: len(MAGIC)], data[len(MAGIC) : len(MAGIC) + 32], data[len(MAGIC) + 32 :]
    if head == MAGIC and hashlib.sha256(neff).digest() == check:
        return neff
    path.unlink(missing_ok=True)
    return None


def store(directory: Path, digest: str, neff: bytes) -> None:
    """Write the entry atomically (a temporary file in the same folder, renamed into place)."""
    path = _entry(directory, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(neff).digest() + neff)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
