"""The README's table of StableHLO and chlo ops (issue 27 item 6) says what nkic does: every op the dialects define is
in it once, every op nkic's dialects register is among them, and each row's status is what ``nkic.hlo.coverage``
finds in the code (registered ops, the interpreter's lowerings, chlo-legalize). An op marked rejected is rejected in
one line at its MLIR line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nkic.interop.framework import compile_stablehlo
from nkic.frontend.errors import NkiError
from nkic.hlo import coverage

README = Path(__file__).resolve().parents[2] / "README.md"


def _table() -> dict[str, str]:
    """op name -> status, from the README's 'StableHLO and chlo ops' table (an op twice is an error)."""
    text = README.read_text()
    section = text[text.index("### StableHLO and chlo ops") :]
    rows = [line for line in section.split("\n\n", 3)[2].splitlines() if line.startswith("| ") and "---" not in line]
    table: dict[str, str] = {}
    for row in rows[1:]:  # after the header
        dialect, ops, status, _how = (c.strip() for c in row.strip("|").split("|"))
        for op in re.findall(r"`([a-z_0-9]+)`", ops):
            name = f"{dialect}.{op}"
            assert name not in table, f"{name} is in the table twice"
            table[name] = status
    return table


def test_every_op_is_in_the_table_once() -> None:
    table = _table()
    assert set(table) == set(coverage.all_ops()), sorted(set(table) ^ set(coverage.all_ops()))
    assert coverage.registered() <= set(coverage.all_ops())  # nkic reads no op the dialects do not define


def test_each_status_is_what_the_code_does() -> None:
    wrong = {name: (said, coverage.status(name)) for name, said in _table().items() if said != coverage.status(name)}
    assert not wrong, f"README says / code does: {wrong}"


def test_registered_means_not_rejected_at_parse() -> None:
    """An op the table calls 'not read' is not registered; one it calls lowered or routed is."""
    for name, status in _table().items():
        if status != "rejected":
            assert name in coverage.registered(), name


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('%1 = "stablehlo.atan2"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>',
         r"^m\.mlir:3: error: stablehlo\.atan2: not an op nkic reads"),
        ("%1 = stablehlo.remainder %a, %a : tensor<4xf32>",
         r"^m\.mlir:3: error: stablehlo\.remainder: no tile lowering, .*\(stablehlo\.remainder m\.mlir:3:3\)"),
    ],
    ids=["not-read", "read-not-lowered"],
)  # fmt: skip
def test_a_rejected_op_is_one_line_at_its_mlir_line(line: str, message: str) -> None:
    text = f"""func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  {line}
  func.return %1 : tensor<4xf32>
}}
"""
    with pytest.raises(NkiError, match=message) as err:
        compile_stablehlo(text, filename="m.mlir")
    assert "\n" not in str(err.value)
