"""Which restriction sentences of the NKI API reference are encoded as rules, waived, or neither.

The reference is the NKI docs' API stubs (``nki/api/nki/isa/__init__.py`` and ``nki/api/nki/language/__init__.py``),
read by path; nothing of it is copied into nkic. A *restriction sentence* is a sentence of a function's docstring
(before its examples) with one of the words of ``RESTRICTION``. A sentence is

* *encoded* when a rule's ``says`` is part of it (or it of ``says``: a rule may quote a longer passage);
* *waived* when ``WAIVERS`` (``waive(...)`` in the family modules) names it (function and the sentence's first words) with a reason: advice rather than a
  restriction, semantics rather than a rule, or a rule nkic checks elsewhere (``checked:`` names where);
* *open* otherwise. ``python -m nkic.target.rules --report STUBS_DIR`` prints every sentence with its status.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nkic.target.instructions import INSTRUCTIONS
from nkic.target.rules import RULES, WAIVERS, Rule

RESTRICTION = re.compile(
    r"\b(must|only|not supported|unsupported|cannot|can not|at most|must not exceed|not allowed|required|"
    r"requires|should be|is limited to|up to)\b",
    re.IGNORECASE,
)
MODULES = {"isa": "nisa", "language": "nl"}


@dataclass(frozen=True)
class Sentence:
    api: str  # "nisa.nc_matmul"
    text: str  # markup removed, one line


def plain(text: str) -> str:
    """Docstring text without reST markup and line breaks."""
    return re.sub(r"\s+", " ", text.replace("``", "").replace("**", "").replace("*", "")).strip()


def _body(doc: str) -> str:
    """The docstring's prose: no examples, no code blocks, no figure directives."""
    doc = re.split(r"\n\s*Examples?:|\n\s*Example\b", doc)[0]
    kept, skipping = [], False
    for line in doc.splitlines():
        if re.match(r"\s*\.\. (code-block|figure|image)::", line):
            skipping = True
            continue
        if skipping and (not line.strip() or line.startswith((" ", "\t"))):
            continue
        skipping = False
        kept.append(line)
    return "\n".join(kept)


def sentences(stubs: Path) -> Iterator[Sentence]:
    """Every restriction sentence of every ``nki.isa`` and ``nki.language`` function, in file order."""
    for module, prefix in MODULES.items():
        tree = ast.parse((stubs / module / "__init__.py").read_text())
        for f in tree.body:
            if not isinstance(f, ast.FunctionDef) or f.name.startswith("_"):
                continue
            for s in _split(_body(ast.get_docstring(f) or "")):
                if RESTRICTION.search(s):
                    yield Sentence(f"{prefix}.{f.name}", s)


def _split(doc: str) -> Iterator[str]:
    """Sentences: paragraphs (blank lines, ``:param`` entries, notes and list items start new ones), then
    sentence ends."""
    doc = re.sub(r"\n\s*(?=:param |:return|\.\. note::|\.\. warning::|- )", "\n\n", doc)
    doc = re.sub(r"\.\. (note|warning)::", "", doc)
    for para in re.split(r"\n\s*\n", doc):
        text = plain(para)
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(:`-])", text):
            if s:
                yield s


def _api_of(r: Rule) -> str:
    return r.api or f"nisa.{INSTRUCTIONS[r.instr].nki_name or r.instr}"


def status(s: Sentence) -> tuple[str, str]:
    """("encoded", the rule's instruction) | ("waived", the reason) | ("open", "")."""
    for rules in RULES.values():
        for r in rules:
            says = plain(r.says)
            if _api_of(r) == s.api and (says in s.text or s.text in says):
                return "encoded", r.instr
    for (api, start), reason in WAIVERS.items():
        if api == s.api and s.text.startswith(start):
            return "waived", reason
    return "open", ""


# Waiver kinds that are not restrictions at all (the reason's first word); "unsupported" marks a restriction on a
# feature nkic does not implement (an error at the call), so no call can break it.
NOT_RESTRICTIONS = ("advice", "semantics", "signature")


def share(rows: list[tuple[Sentence, str, str]]) -> dict[str, int]:
    """The encoded share's terms: ``real`` restriction sentences (every sentence but the advice / semantics /
    signature waivers), of them ``implemented`` (not about a feature nkic lacks), and ``encoded``."""
    kind = [re.split(r"[,:]", why)[0] if st == "waived" else st for _, st, why in rows]
    real = [k for k in kind if k not in NOT_RESTRICTIONS]
    return {"encoded": real.count("encoded"), "real": len(real), "implemented": len(real) - real.count("unsupported")}


def report(stubs: Path) -> tuple[list[tuple[Sentence, str, str]], dict[str, int]]:
    rows = [(s, *status(s)) for s in sentences(stubs)]
    counts = {k: sum(1 for _, st, _ in rows if st == k) for k in ("encoded", "waived", "open")}
    return rows, counts
