"""ARCHITECTURE.md's recipe "Adding an ALU op or a dtype" holds: one record in target/vocab.py is all the code it
takes. A fresh interpreter loads nkic with one extra ALU record and one extra dtype record spliced into
target/vocab.py's source as it is imported (nothing is written to disk), then checks that every table nkic derives
from the records has the new entries and that a kernel computes with them, against numpy. test_vocab_records
then checks the real records the same way, and that runtime/ISA_FORMAT.md lists them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from nkic.target.vocab import ALU_OPS, DTYPE_CODES

# The extra records, as a contributor would write them (codes unused by the real records: checked below).
ALU_LINE = '    _alu("test_abs_diff", 0x5F, "exact tile", lambda a, b: np.abs(a - b)),\n'
DTYPE_LINE = '    _dt("test_int64", 0x7E, np.int64, "i64"),\n'

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, importlib.util, sys

    ALU_LINE, DTYPE_LINE = sys.argv[1], sys.argv[2]


    class WithRecords(importlib.machinery.SourceFileLoader):
        def get_data(self, path):  # the source of target/vocab.py, with the two records added to their tuples
            text = super().get_data(path).decode()
            for opener, line in (("ALU_RECORDS: tuple[AluRecord, ...] = (\\n", ALU_LINE),
                                 ("DTYPE_RECORDS: tuple[DtypeRecord, ...] = (\\n", DTYPE_LINE)):
                assert opener in text, opener
                text = text.replace(opener, opener + line)
            return text.encode()

        def path_stats(self, path):  # no bytecode cache for the changed source
            raise OSError


    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "nkic.target.vocab":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            return importlib.util.spec_from_file_location(name, spec.origin, loader=WithRecords(name, spec.origin))


    sys.meta_path.insert(0, Finder())
    sys.dont_write_bytecode = True

    import numpy as np

    import nkic
    from nkic.dialects.common import dtype_of_element_type, element_type
    from nkic.frontend.ops import TOKENS, alu_op
    from nkic.runtime import semantics
    from nkic.target.isa import decode_imm, encode_imm
    from nkic.target.vocab import ALU_OPS, DTYPE_CODES, DTYPE_RECORDS, DTYPES, FLOAT_DTYPES, dtype_from_numpy

    nkic.install_nki_alias()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    # every derived table has the new ALU op ...
    assert ALU_OPS.code("test_abs_diff") == 0x5F and decode_imm("alu", encode_imm("alu", "test_abs_diff")) == "test_abs_diff"
    assert alu_op(TOKENS["test_abs_diff"]) == "test_abs_diff" and callable(nl.test_abs_diff)
    assert "test_abs_diff" in semantics.INT_EXACT_OPS and "test_abs_diff" in semantics.ALU_FUNCS
    # ... and the new dtype
    assert DTYPE_CODES.code("test_int64") == 0x7E and DTYPES["test_int64"] == np.int64
    assert str(nl.test_int64) == "test_int64" and "test_int64" not in FLOAT_DTYPES
    assert dtype_of_element_type(element_type("test_int64")) == "test_int64"
    first = next(r.name for r in DTYPE_RECORDS if r.storage == np.int64)  # a real int64 record would come first
    assert dtype_from_numpy(np.dtype(np.int64)) == first

    # a kernel computes with them: the op through nisa.tensor_tensor, the dtype through SBUF and back
    a = np.arange(-64, 64, dtype=np.float32).reshape(128, 1) * np.ones((1, 8), np.float32)
    b = np.full((128, 8), 3.5, np.float32)
    big = (np.arange(128 * 4, dtype=np.int64).reshape(128, 4) << 40) - 7

    @nki.jit
    def kernel(x, y, z):
        xs, ys, zs = (nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf) for t in (x, y, z))
        for dst, src in ((xs, x), (ys, y), (zs, z)):
            nisa.dma_copy(dst=dst, src=src)
        diff = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=diff, data1=xs, data2=ys, op=nl.test_abs_diff)
        out, copy = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm), nl.ndarray(z.shape, dtype=z.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=diff)
        nisa.dma_copy(dst=copy, src=zs)
        return out, copy

    got_diff, got_copy = kernel(a, b, big)
    np.testing.assert_array_equal(np.asarray(got_diff), np.abs(a - b))
    np.testing.assert_array_equal(np.asarray(got_copy), big)
    print("recipe holds")
    """
)


def test_the_extra_codes_are_free() -> None:
    assert ALU_OPS.name_of(0x5F) is None and DTYPE_CODES.name_of(0x7E) is None


def test_one_record_adds_an_alu_op_and_a_dtype_everywhere() -> None:
    run = subprocess.run([sys.executable, "-c", SCRIPT, ALU_LINE, DTYPE_LINE], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("recipe holds"), run.stderr[-3000:]
