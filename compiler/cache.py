"""A content-addressed NEFF cache on disk: ``NKIC_CACHE_DIR`` (off when unset or empty).

The key is a digest of **what was compiled**, not of what was written (as JAX's persistent cache does), so a hit is
the NEFF this process would have built:

* the traced penguin module's text: every value the trace read is in it by construction — closure cells, module
  globals' run-time values, constants read from the environment, ``nl.shared_constant`` data, code from installed
  packages — and the code that ran is the code imported, not the file on disk now;
* the compile settings (``settings``): the kernel's name, its inputs, outputs and options, and the settings that change
  the code without being kernel options (loop rolling, debug info);
* the compiler (``compiler_digest``): nkic's version, the versions of the libraries that shape its output, and the
  digest of nkic's own sources. It is computed once per process and only while the sources are still the files this
  process imported (``nkic.sources.SOURCE_STATS``): after an edit under a running process, that process compiles
  uncached.

A warm hit therefore traces (cheap next to compiling) and skips every pass after it. An entry is ``MAGIC +
sha256(neff) + neff``, written to a temporary file in its folder, fsynced and renamed into place, so a reader sees a
whole entry or none; an entry that fails its checksum is ignored, deleted and rebuilt. Entries follow the umask
(a team can share the folder); a hit marks its entry used (mtime), and a store evicts the least recently used
entries beyond ``NKIC_CACHE_MAX_BYTES`` (default 2 GiB) and removes temporary files a killed process left over an
hour ago. A cache folder that cannot be used is one warning, once per process; the compile goes on uncached.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nkic.support import safeio

from nkic import sources, version
CACHE_DIR_ENV = "NKIC_CACHE_DIR"
MAX_BYTES_ENV = "NKIC_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 2 << 30
MAGIC = b"NKIC-NEFF-CACHE-1\n"
TMP_PREFIX = safeio.TEMP_PREFIX  # a killed writer's leftover, removed after an hour
STALE_TMP_SECONDS = 3600.0
# Libraries whose version can change the NEFF bytes nkic prints (xDSL parses and prints the IR, numpy computes
# constants and the NEFF's embedded data, ml-dtypes converts the narrow floats).
_DEPENDENCIES = ("xdsl", "numpy", "ml-dtypes")


class Uncacheable(Exception):
    """The key of this compile cannot be computed reproducibly."""


class CacheWarning(UserWarning):
    """The cache folder cannot be used; compiles go on without it."""


def cache_dir() -> Path | None:
    """The cache folder, or None when the cache is off."""
    value = os.environ.get(CACHE_DIR_ENV, "")
    return Path(value) if value else None


def max_bytes() -> int:
    """``NKIC_CACHE_MAX_BYTES`` (a plain byte count, or with a K/M/G suffix), default 2 GiB."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip().upper()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        return max(0, int(float(text.rstrip("KMGB") or "x") * scale))
    except ValueError:
        warn_once(f"{MAX_BYTES_ENV}={text!r} is not a size; using {DEFAULT_MAX_BYTES} bytes")
        return DEFAULT_MAX_BYTES


_warned: set[str] = set()
_warn_lock = threading.Lock()


def warn_once(message: str, topic: str | None = None) -> None:
    """One ``CacheWarning`` per topic (default: the message) per process."""
    with _warn_lock:
        if (topic or message) in _warned:
            return
        _warned.add(topic or message)
    warnings.warn(message, CacheWarning, stacklevel=3)


def unusable(directory: Path, error: OSError) -> None:
    """Say once per process and folder that the cache folder cannot be used; compiles go on without it."""
    warn_once(f"NEFF cache {directory} cannot be used ({error.strerror or error}); compiling without it",
              topic=f"dir:{directory}")  # fmt: skip


# ------------------------------------------------------------------------------------------------------------
# The key
# ------------------------------------------------------------------------------------------------------------
_identity_lock = threading.Lock()
_identity: tuple[str | None, str] | None = None  # (digest, or None with the reason it cannot be known)


def _dependency_versions() -> str:
    versions = [f"python={sys.version_info[0]}.{sys.version_info[1]}"]
    for name in _DEPENDENCIES:
        try:
            versions.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name}=?")
    return ",".join(versions)


def _compute_identity() -> tuple[str | None, str]:
    root = Path(sources.__file__).resolve().parent
    changed = "nkic's sources changed since this process imported them; restart it to use the NEFF cache"
    if sources.source_stats() != sources.SOURCE_STATS:
        return None, changed
    h = hashlib.sha256(f"nkic={version.__version__};{_dependency_versions()}".encode())
    for rel in sorted(sources.SOURCE_STATS):
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    if sources.source_stats() != sources.SOURCE_STATS:  # edited while being read
        return None, changed
    return h.hexdigest(), ""


def compiler_digest() -> str:
    """The build identity of this process's compiler (computed once); raises Uncacheable, with a one-time warning,
    when nkic's source files are no longer the ones this process imported."""
    global _identity
    with _identity_lock:
        if _identity is None:
            try:
                _identity = _compute_identity()
            except OSError as e:
                _identity = None, f"nkic's sources cannot be read ({e}); the NEFF cache is off in this process"
        digest, reason = _identity
    if digest is None:
        warn_once(reason)
        raise Uncacheable(reason)
    return digest


def reset_compiler_digest() -> None:
    """Forget the computed build identity (tests that change the version)."""
    global _identity
    with _identity_lock:
        _identity = None


def _stable(value: Any) -> Any:
    """``value`` as JSON-able data that is the same in every process; Uncacheable when it holds an object whose
    only text names its address."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_stable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in value.items()}
    text = f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"
    if " at 0x" in text or " object at " in text:
        raise Uncacheable(f"a compile setting without a reproducible form ({text[:60]})")
    return text


def key(module_text: str, settings: dict[str, Any]) -> str:
    """The cache key of compiling the penguin module printed as ``module_text`` with ``settings`` (the NEFF's
    metadata and the code-changing compiler settings); raises Uncacheable."""
    h = hashlib.sha256(b"nkic-neff-2\0" + compiler_digest().encode() + b"\0")
    h.update(json.dumps(_stable(settings), sort_keys=True).encode() + b"\0")
    h.update(module_text.encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------------------------
# Entries
# ------------------------------------------------------------------------------------------------------------
def _entry(directory: Path, digest: str) -> Path:
    return directory / digest[:2] / f"{digest}.neff"


def load(directory: Path, digest: str) -> bytes | None:
    """The cached NEFF for ``digest``, or None (absent, or corrupt: then the entry is deleted). A hit marks the
    entry used, for eviction."""
    path = _entry(directory, digest)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        unusable(directory, e)
        return None
    head, check, neff = data[: len(MAGIC)], data[len(MAGIC) : len(MAGIC) + 32], data[len(MAGIC) + 32 :]
    if head == MAGIC and hashlib.sha256(neff).digest() == check:
        try:
            os.utime(path)
        except OSError:  # a read-only shared cache still serves hits
            pass
        return neff
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
    return None


def store(directory: Path, digest: str, neff: bytes) -> None:
    """Write the entry atomically and durably (``nkic.support.safeio``: a temporary file in the same folder, fsynced, renamed
    into place, the umask's permissions, no link followed below the cache folder); then keep the cache within its
    size limit. Raises OSError."""
    path = _entry(directory, digest)
    safeio.make_dirs(path.parent)
    safeio.write_bytes(path, MAGIC + hashlib.sha256(neff).digest() + neff, within=directory)
    evict(directory, max_bytes(), keep=path)


@dataclass
class CacheStats:
    entries: int = 0
    bytes: int = 0
    temporary: int = 0  # temporary files of writes in progress (or of killed processes)


def _scan(directory: Path) -> tuple[list[tuple[float, int, Path]], list[tuple[float, Path]]]:
    """(mtime, size, path) of every entry and (mtime, path) of every temporary file."""
    entries: list[tuple[float, int, Path]] = []
    temps: list[tuple[float, Path]] = []
    try:
        folders = [d for d in os.scandir(directory) if d.is_dir(follow_symlinks=False) and len(d.name) == 2]
    except FileNotFoundError:
        return entries, temps
    for folder in folders:
        try:
            files = list(os.scandir(folder.path))
        except OSError:
            continue
        for f in files:
            try:
                st = f.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile by another process
                continue
            if f.name.startswith(TMP_PREFIX):
                temps.append((st.st_mtime, Path(f.path)))
            elif f.name.endswith(".neff"):
                entries.append((st.st_mtime, st.st_size, Path(f.path)))
    return entries, temps


def stats(directory: Path) -> CacheStats:
    entries, temps = _scan(directory)
    return CacheStats(len(entries), sum(size for _, size, _ in entries), len(temps))


def evict(directory: Path, limit: int, keep: Path | None = None) -> int:
    """Remove temporary files older than an hour, then the least recently used entries until the cache holds at
    most ``limit`` bytes (never ``keep``, the entry just written); the number of entries removed."""
    entries, temps = _scan(directory)
    now = time.time()
    for mtime, path in temps:
        if now - mtime > STALE_TMP_SECONDS:
            path.unlink(missing_ok=True)
    total = sum(size for _, size, _ in entries)
    removed = 0
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        if path == keep:
            continue
        try:
            path.unlink()
        except FileNotFoundError:  # another process evicted it first
            pass
        total -= size
        removed += 1
    return removed


def clear(directory: Path) -> int:
    """Remove every entry and temporary file; the number of entries removed."""
    entries, temps = _scan(directory)
    for _, path in temps:
        path.unlink(missing_ok=True)
    for _, _, path in entries:
        path.unlink(missing_ok=True)
    return len(entries)
