"""The subcommands that read without compiling: ``nkic info`` (describe a NEFF) and ``nkic cache`` (the NEFF cache's
folder: info, clear), and the helpers every command's messages share. Apart from ``tools/commands.py`` so that they
load neither xDSL nor the compiler."""

from __future__ import annotations

import argparse
from pathlib import Path

from nkic.compiler import cache
from nkic.runtime.neff import NeffFormatError, read_neff
from nkic.support import safeio
from nkic.tools.cli import CliError

# The errors these commands report as their one line (``cli.error_line``).
REPORTED = (CliError, NeffFormatError, safeio.OutputError, ValueError, TypeError, KeyError)


def shown(text: str) -> str:
    """A path or name for an error message: NUL and other control characters escaped, long ones cut."""
    shown = text if text.isprintable() else repr(text)
    return shown if len(shown) <= 80 else f"{shown[:60]}...({len(text)} characters)"


def read_input(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL
        raise CliError(f"cannot read {shown(path)}: {getattr(e, 'strerror', None) or e}") from None


def cmd_info(args: argparse.Namespace) -> None:
    neff = read_neff(read_input(args.neff))
    print(f"NEFF {neff.name}: {len(neff.subgraphs)} subgraph(s)")
    for k, v in sorted(neff.metadata.items()):
        print(f"  {k}: {v}")
    for var in neff.variables:
        print(f"  var {var.name}: {var.kind} {var.dtype}{list(var.shape)}")
    for sg in neff.subgraphs:
        counts = ", ".join(f"{e} {len(i)}" for e, i in sg.engines.items())
        print(f"  {sg.name}: {counts}")


def cmd_cache(args: argparse.Namespace) -> None:
    """``nkic cache info``: the folder, its entries and bytes against the limit; ``nkic cache clear``: remove every
    entry (and leftover temporary files)."""
    directory = cache.cache_dir()
    if directory is None and args.action == "info":
        print(f"cache: off (set {cache.CACHE_DIR_ENV} to a folder to turn it on)")
        return
    if directory is None:
        raise CliError(f"the NEFF cache is off: set {cache.CACHE_DIR_ENV} to a folder")
    if args.action == "clear":
        try:
            removed = cache.clear(directory)
        except OSError as e:
            raise CliError(f"cannot clear {directory}: {e.strerror or e}") from None
        print(f"removed {removed} entries from {directory}")  # outside the try: a closed stdout is not a cache error
        return
    st = cache.stats(directory)
    print(f"cache: {directory}")
    print(f"entries: {st.entries}")
    print(f"bytes: {st.bytes} (limit {cache.max_bytes()}, {cache.MAX_BYTES_ENV})")
    if st.temporary:
        print(f"temporary files: {st.temporary} (writes in progress, or left by killed processes; removed after an hour)")
