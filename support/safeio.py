"""Atomic file writes that never follow a symbolic link: every file nkic writes goes through here.

The API (POSIX: it needs ``O_NOFOLLOW``, ``O_DIRECTORY`` and ``dir_fd``)::

    write_bytes(path, data, *, within=None) -> None
    write_text(path, text, *, within=None, encoding="utf-8") -> None
    write_with(path, fill, *, within=None) -> None
        ``fill(f)`` writes the contents into ``f``, a binary file object: ``write_with(p, lambda f: np.save(f, a))``.
    make_dirs(path) -> None
        ``mkdir -p``: new folders get 0o777 less the umask; something that is not a folder in the way is an error.
    check_destination(path) -> None
        Raise the OutputError a write of ``path`` would raise because of the destination itself (a link, a folder,
        a missing parent), writing nothing: for checks before long work.
    not_a_directory(path) -> str | None
        None when ``path`` is a directory; else why not, naming the first component at fault
        (``the directory nodir does not exist``, ``afile is not a directory``).
    Folder(path, *, create=False)
        An open directory handle (a context manager; ``close()``). ``folder.write_bytes/write_text/write_with(rel,
        ...)`` write ``rel``, a path relative to it; a Folder is also accepted as ``within=``.
    OutputError(OSError)
        Every failure of the above. ``str(e)`` is one line naming the file and the reason (``cannot write out/k.neff:
        No space left on device``); ``e.filename`` is the path as given, ``e.strerror`` the reason, ``e.errno`` the
        OS error number (0 when the refusal is nkic's own, as for a symbolic link).
    TEMP_PREFIX = ".tmp-"
        Temporary files are named ``.tmp-<16 hex digits>[-<name>]`` beside the destination. Only a process killed
        outright (SIGKILL, a power cut) leaves one; it is never mistaken for the destination and may be removed. The
        next write of the same destination removes its leftovers once they are an hour old (``STALE_TEMP_SECONDS``,
        the NEFF cache's rule for its own): a younger one may be another process's write in progress.

How a file is written: its directory is opened (``O_DIRECTORY``); a temporary file is created in it relative to that
handle with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0o666, so the umask applies exactly as with ``open()`` (0o022
gives 0o644, 0o002 gives 0o664; ``mkstemp``'s 0600 would lock out the rest of a team); ``fill`` writes it, it is
fsynced, then renamed over the destination (``os.replace`` with ``src_dir_fd``/``dst_dir_fd``), and the directory is
fsynced so the rename survives a crash. Readers see the old file or the new one, never a part of either. When
anything fails, or the write is interrupted (``KeyboardInterrupt`` included), the temporary file is removed and the
previous file is left as it was; an ``OSError`` becomes an ``OutputError``, other exceptions propagate unchanged.

Symbolic links: a link at the destination is refused, never followed, whatever it points to. The check is made
before the write and again before the rename; a link planted after that is *replaced* by the rename (a rename never
follows links), so nothing is written through it. The file replaced must be a regular file: a directory, device,
pipe or socket there is an error (replacing ``/dev/null`` as root would be a disaster). The directories leading to
the destination are the caller's path and are followed, as ``open()`` follows them; except under ``within``.

``within=DIR``: the write must land inside DIR. DIR is opened once (a link naming DIR itself is followed: the caller
chose it) and every component of the path below it is opened relative to the previous one with ``O_DIRECTORY |
O_NOFOLLOW`` (openat), the temporary file is created and renamed relative to the last handle. So the containment
is decided when the file is opened: a symbolic link planted anywhere below DIR, even during a long run after every
earlier check, makes the write fail instead of landing outside. ``path`` must lie lexically inside DIR (both taken
relative to the current directory; ``..`` out of DIR is refused). To pin DIR itself for the duration of a long
computation (so that even DIR being renamed and replaced by a link cannot redirect the writes), open a ``Folder``
before the computation and pass it as ``within=`` or write through its methods.

This module imports no other nkic module and no xDSL: the runtime, the driver, the cache and the tools all use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections.abc import Callable
from typing import IO, Any

TEMP_PREFIX = ".tmp-"
STALE_TEMP_SECONDS = 3600.0
_TEMP_TOKEN_DIGITS = 16  # secrets.token_hex(8)

StrPath = str | os.PathLike[str]
Fill = Callable[[IO[bytes]], Any]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK_REASON = "it is a symbolic link, and nkic never writes through one (remove it, or write elsewhere)"
# Below this many bytes the destination's name is kept in the temporary file's name (readable in `ls -a`); a longer
# name would push the temporary name past NAME_MAX (255 bytes) and make a legal destination fail.
_NAME_IN_TEMP_MAX = 200


class OutputError(OSError):
    """A file or folder nkic could not write; ``str(e)`` is ``cannot <action> <path>: <reason>``, one line."""

    def __init__(self, path: StrPath, reason: str, code: int = 0, *, action: str = "write") -> None:
        super().__init__(code, reason, _shown(path))
        self.action = action

    def __str__(self) -> str:
        return f"cannot {self.action} {self.filename}: {self.strerror}"


def _shown(path: StrPath) -> str:
    """A path as messages show it: as given, or its repr when it holds control characters (a newline must not
    split the one-line message)."""
    text = os.fspath(path)
    return text if text.isprintable() else repr(text)


def _from_os(path: StrPath, e: OSError, action: str = "write") -> OutputError:
    if isinstance(e, OutputError):
        return e
    return OutputError(path, e.strerror or str(e) or type(e).__name__, e.errno or 0, action=action)


# -- what is wrong with a folder path ----------------------------------------------------------------------------
def _probe(path: str) -> str | None:
    """None for a directory (links followed), else a short reason naming ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            return f"{_shown(path)} is a symbolic link to nothing"
        return f"the directory {_shown(path)} does not exist"
    except OSError as e:
        return f"{_shown(path)}: {e.strerror or e}"
    return None if stat.S_ISDIR(st.st_mode) else f"{_shown(path)} is not a directory"


def not_a_directory(path: StrPath) -> str | None:
    """None when ``path`` is a directory; else why it cannot hold files, naming the first component on the way that
    is missing or not a directory: ``-o afile/k.neff`` must say that ``afile`` is not a directory, not that
    ``afile/`` does not exist."""
    prefixes = [os.fspath(path) or os.curdir]
    while True:
        parent = os.path.dirname(prefixes[-1].rstrip(os.sep) or os.sep)
        if not parent or parent == prefixes[-1]:
            break
        prefixes.append(parent)
    for prefix in reversed(prefixes):  # the shortest first: the first one at fault is the one to name
        reason = _probe(prefix)
        if reason is not None:
            return reason
    return None


def make_dirs(path: StrPath) -> None:
    """Create the directory ``path`` and any missing parents (0o777 less the umask), as ``mkdir -p``. A file, or a
    link to nothing, in the way is an ``OutputError`` naming it."""
    text = os.fspath(path)
    try:
        os.makedirs(text, exist_ok=True)
    except FileExistsError:  # exist_ok still raises when `text`, or a parent to make, exists and is not a directory
        if not os.path.lexists(text):  # a parent: a link to nothing on the way
            reason = not_a_directory(text) or "exists and is not a directory"
        elif os.path.islink(text):
            reason = "is a symbolic link to nothing"
        else:
            reason = "exists and is not a directory"
        raise OutputError(text, reason, errno.EEXIST, action="create the directory") from None
    except (NotADirectoryError, FileNotFoundError) as e:
        reason = not_a_directory(os.path.dirname(text.rstrip(os.sep))) or e.strerror or str(e)
        raise OutputError(text, reason, e.errno or 0, action="create the directory") from None
    except OSError as e:
        raise _from_os(text, e, "create the directory") from None


# -- writing ------------------------------------------------------------------------------------------------------
def write_bytes(path: StrPath, data: bytes, *, within: StrPath | Folder | None = None) -> None:
    """Write ``data`` to ``path`` atomically; see the module docstring."""
    write_with(path, lambda f: f.write(data), within=within)


def write_text(path: StrPath, text: str, *, within: StrPath | Folder | None = None, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (encoded first, so an encoding error creates nothing)."""
    write_bytes(path, text.encode(encoding), within=within)


def write_with(path: StrPath, fill: Fill, *, within: StrPath | Folder | None = None) -> None:
    """Write what ``fill(f)`` writes into the binary file object ``f`` to ``path`` atomically; see the module
    docstring for ``within``."""
    if within is not None:
        folder = within if isinstance(within, Folder) else Folder(within)
        try:
            folder._write(folder._inside(path), fill, _shown(path))
        finally:
            if folder is not within:
                folder.close()
        return
    text = os.fspath(path)
    dfd, name = _open_parent(text)
    try:
        _write_at(dfd, name, fill, _shown(text))
    finally:
        os.close(dfd)


def check_destination(path: StrPath) -> None:
    """Raise the ``OutputError`` that writing ``path`` would raise because of the destination itself (a symbolic
    link, a directory, a device; a missing parent or one that is not a directory; a name the file system refuses),
    without writing anything: a command checks its outputs before long work. The write checks again."""
    text = os.fspath(path)
    dfd, name = _open_parent(text)
    try:
        _check_destination(dfd, name, _shown(text))
    finally:
        os.close(dfd)


def _open_parent(text: str) -> tuple[int, str]:
    """A handle on the folder of the file ``text`` (links followed, as ``open()`` would) and the file's name."""
    parent, name = os.path.split(text)
    if name in ("", os.curdir, os.pardir):
        raise OutputError(text, os.strerror(errno.EISDIR), errno.EISDIR)
    return _open_directory(parent or os.curdir, text), name


def _open_directory(directory: str, shown_as: str, action: str = "write") -> int:
    """A handle on ``directory`` (links followed: the caller named it); failures name ``shown_as``."""
    try:
        return os.open(directory, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError) as e:
        reason = not_a_directory(directory) or e.strerror or str(e)
        raise OutputError(shown_as, reason, e.errno or 0, action=action) from None
    except OSError as e:
        raise _from_os(shown_as, e, action) from None


def _check_destination(dfd: int, name: str, shown: str) -> None:
    """Refuse what must not be replaced: a symbolic link (never followed), a directory, a device, pipe or socket."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as e:
        raise _from_os(shown, e) from None
    if stat.S_ISLNK(st.st_mode):
        raise OutputError(shown, _LINK_REASON, errno.ELOOP)
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(shown, os.strerror(errno.EISDIR), errno.EISDIR)
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(shown, "it is not a regular file (a device, pipe or socket), which nkic does not replace")


def _create_temp(dfd: int, name: str, shown: str, mine: list[str]) -> tuple[str, int]:
    """A new temporary file beside ``name`` (O_EXCL: never an existing file or link), mode 0o666 less the umask.

    Its name is put in ``mine`` *before* the file is created, so that the caller removes it whenever the write
    stops: a KeyboardInterrupt raised right after ``os.open`` returned, before this function did, left the file behind
    (sending SIGINT the moment the temporary file appeared: 2 of 5 interrupted compiles left one)."""
    tail = f"-{name}" if len(os.fsencode(name)) <= _NAME_IN_TEMP_MAX else ""
    for _ in range(100):
        tmp = f"{TEMP_PREFIX}{secrets.token_hex(_TEMP_TOKEN_DIGITS // 2)}{tail}"
        mine.append(tmp)
        try:
            return tmp, os.open(tmp, _FILE_FLAGS, 0o666, dir_fd=dfd)
        except FileExistsError:  # 64 random bits taken: another writer's file, or one planted; draw again
            mine.remove(tmp)
            continue
        except OSError as e:
            mine.remove(tmp)
            raise _from_os(shown, e) from None
    raise OutputError(shown, "no unused temporary file name in its directory", errno.EEXIST)


def _write_at(dfd: int, name: str, fill: Fill, shown: str) -> None:
    """The atomic write of ``name`` in the directory ``dfd``."""
    _check_destination(dfd, name, shown)
    mine: list[str] = []  # the temporary file, once it may exist
    try:
        tmp, fd = _create_temp(dfd, name, shown, mine)
        try:
            f = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with f:
            try:
                fill(f)
            except OSError as e:
                raise _with_reason(f, e) from e
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        _check_destination(dfd, name, shown)  # again: a long fill leaves time to plant a link
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException as e:
        for tmp in mine:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        if isinstance(e, OSError) and not isinstance(e, OutputError):
            raise _from_os(shown, e) from e
        raise
    with contextlib.suppress(OSError):  # some file systems cannot fsync a directory; the file itself is complete
        os.fsync(dfd)
    _remove_stale_temps(dfd, name)


def _remove_stale_temps(dfd: int, name: str) -> None:
    """Remove the temporary files of earlier writes of ``name`` in ``dfd`` that are over an hour old: SIGKILL gives a
    writer no chance to remove its own (bench/kill_outputs.py kills writers mid-write). Only names this module makes
    for ``name`` (``.tmp-<16 hex digits>-<name>``, a regular file) are touched; a name too long to carry ``name`` is
    left alone, as is anything that cannot be read or removed."""
    tail = f"-{name}"
    if len(os.fsencode(name)) > _NAME_IN_TEMP_MAX:
        return
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(dfd) as entries:  # a dup of dfd, rewound when closed
        for entry in entries:
            token = entry.name[len(TEMP_PREFIX) : -len(tail)]
            if not (entry.name.startswith(TEMP_PREFIX) and entry.name.endswith(tail)) or not _is_token(token):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMP_SECONDS:
                    os.unlink(entry.name, dir_fd=dfd)


def _is_token(text: str) -> bool:
    return len(text) == _TEMP_TOKEN_DIGITS and all(c in "0123456789abcdef" for c in text)


def _with_reason(f: IO[bytes], e: OSError) -> OSError:
    """``e``, or when it carries no OS error number the OS's own reason for the failed write.

    ``numpy.save`` writes an array's data with ``ndarray.tofile``, which writes through C stdio and reports a short
    write as ``OSError("524288 requested and 16352 written")`` with no errno (numpy/_core/src/multiarray/convert.c),
    so a full disk would read ``cannot write out.npy: 524288 requested and 16352 written``. One more byte written at
    the end of the file fails as the short write did (ENOSPC on a full disk, EFBIG past RLIMIT_FSIZE), and that
    reason is reported instead. The temporary file is deleted afterwards, so the probe byte is never seen."""
    if e.errno:
        return e
    try:
        os.lseek(f.fileno(), 0, os.SEEK_END)
        os.write(f.fileno(), b"\0")
    except OSError as reason:
        return reason
    return e


class Folder:
    """An open directory: every write through it stays inside it, whatever is renamed or linked meanwhile.

    ``Folder(path)`` opens ``path`` now (``create=True`` first makes it, with its parents); keep it open across a long
    computation and the writes after it go into this directory even if ``path`` has since been renamed and replaced
    by a link. Paths given to the methods are relative to the folder; each component below it is opened without
    following links (see the module docstring)."""

    def __init__(self, path: StrPath, *, create: bool = False) -> None:
        self.path = os.fspath(path)
        self._abs = os.path.abspath(self.path)
        if create:
            make_dirs(self.path)
        self._fd = _open_directory(self.path, self.path, action="use the directory")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def write_bytes(self, rel: StrPath, data: bytes) -> None:
        self.write_with(rel, lambda f: f.write(data))

    def write_text(self, rel: StrPath, text: str, encoding: str = "utf-8") -> None:
        self.write_bytes(rel, text.encode(encoding))

    def write_with(self, rel: StrPath, fill: Fill) -> None:
        shown = _shown(os.path.join(self.path, os.fspath(rel)))
        self._write(self._components(os.fspath(rel), shown), fill, shown)

    # -- internals ---------------------------------------------------------------------------------------------
    def _outside(self, shown: str) -> OutputError:
        return OutputError(shown, f"it is not inside {_shown(self.path)}", errno.EPERM)

    def _components(self, rel: str, shown: str) -> list[str]:
        """``rel``'s components, refused unless it names a file below this folder."""
        norm = os.path.normpath(rel) if rel else os.curdir
        if os.path.isabs(norm) or norm == os.curdir or norm == os.pardir or norm.startswith(os.pardir + os.sep):
            raise self._outside(shown)
        return norm.split(os.sep)

    def _inside(self, path: StrPath) -> list[str]:
        """The components below this folder of ``path`` (relative to the current directory), or an error when
        ``path`` does not lie lexically inside it."""
        shown = _shown(path)
        return self._components(os.path.relpath(os.path.abspath(os.fspath(path)), self._abs), shown)

    def _write(self, parts: list[str], fill: Fill, shown: str) -> None:
        if self._fd < 0:
            raise OutputError(shown, f"the folder {_shown(self.path)} was closed", errno.EBADF)
        opened: list[int] = []
        dfd = self._fd
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    sub = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dfd)
                except OSError as e:
                    where = os.path.join(self.path, *parts[: i + 1])
                    raise OutputError(shown, self._why_not_below(dfd, part, where, e), e.errno or 0) from None
                opened.append(sub)
                dfd = sub
            _write_at(dfd, parts[-1], fill, shown)
        finally:
            for fd in opened:
                os.close(fd)

    def _why_not_below(self, dfd: int, part: str, where: str, e: OSError) -> str:
        """Why the component ``part`` (``where`` from the caller's view) could not be opened as a folder."""
        try:
            st = os.stat(part, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return f"the directory {_shown(where)} does not exist"
        except OSError:
            return e.strerror or str(e)
        if stat.S_ISLNK(st.st_mode):
            return f"{_shown(where)} is a symbolic link, which nkic does not follow inside {_shown(self.path)}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{_shown(where)} is not a directory"
        return e.strerror or str(e)
