"""Every nisa call checks its declaration's elementwise roles against dst (``_record``), so an instruction whose
nisa function states no shape check of its own still refuses mismatched tiles with an NkiError at the user's line,
not a verifier failure reported as a bug in nkic."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.recorders import record, vector  # noqa: E402
from kernel_harness import on_chip_case  # noqa: E402


def _reciprocal_of(x: np.ndarray, out_shape: tuple[int, ...]) -> None:
    @nki.jit
    def kernel(a):
        return on_chip_case((a,), (), ((out_shape, a.dtype),), lambda t, out: nisa.reciprocal(dst=out, data=t))[0]

    kernel(x)


def test_the_declaration_checks_elementwise_roles_without_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    # reciprocal's own check and the documented rules switched off: what is left is the declaration's
    monkeypatch.setattr(vector, "_elementwise", lambda op, tensors: None)
    monkeypatch.setattr(record, "RULES", {})
    with pytest.raises(NkiError, match="reciprocal: 'dst' has 64 elements per partition but 'data' has 32") as e:
        _reciprocal_of(np.ones((128, 32), np.float32), (128, 64))
    assert "test_record_elementwise.py" in str(e.value) and "bug in nkic" not in str(e.value)


def test_matching_tiles_pass() -> None:
    _reciprocal_of(np.full((128, 32), 4.0, np.float32), (128, 32))
