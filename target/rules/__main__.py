"""``python -m nkic.target.rules --report STUBS_DIR``: every restriction sentence of the NKI API reference stubs
(``STUBS_DIR`` holds ``isa/__init__.py`` and ``language/__init__.py``) with the rule that encodes it, the reason it is
waived, or OPEN; then the counts. Exit status 1 while any sentence is open."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nkic.target.rules.coverage import report, share


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nkic.target.rules")
    p.add_argument("--report", metavar="STUBS_DIR", required=True, type=Path,
                   help="the nki/api/nki folder of the NKI docs (isa/__init__.py, language/__init__.py)")
    p.add_argument("--open", action="store_true", help="list only the open sentences")
    args = p.parse_args(argv)
    if not (args.report / "isa" / "__init__.py").is_file():
        print(f"python -m nkic.target.rules: error: {args.report}/isa/__init__.py not found", file=sys.stderr)
        return 2
    rows, counts = report(args.report)
    for s, st, why in rows:
        if args.open and st != "open":
            continue
        tag = {"encoded": f"rule of {why}", "waived": f"waived: {why}", "open": "OPEN"}[st]
        print(f"{s.api}: [{tag}] {s.text}")
    print(f"{len(rows)} restriction sentences: {counts['encoded']} encoded, {counts['waived']} waived, "
          f"{counts['open']} open")  # fmt: skip
    n = share(rows)
    print(f"encoded: {n['encoded']} of {n['real']} real restrictions ({100 * n['encoded'] / n['real']:.1f}%; advice, "
          f"semantics and signature notes left out), {n['encoded']} of the {n['implemented']} on features nkic "
          f"implements ({100 * n['encoded'] / n['implemented']:.1f}%; the tensor indirection of instructions nkic "
          "takes no .indirect() view for left out)")  # fmt: skip
    return 1 if counts["open"] else 0


if __name__ == "__main__":
    sys.exit(main())
