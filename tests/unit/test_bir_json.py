"""BIR functions and the kernel carriers serialize to JSON and back losslessly, at every BIR stage."""

from __future__ import annotations

import json

import pytest
from xdsl.dialects.builtin import ModuleOp

from nkic import library
from nkic.dialects import bir, bir_json
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.matmul import matmul
from nkic.kernels.softmax import softmax
from nkic.passes.pipelines import backend, frontend_lowering

STAGES = [p.name for p in frontend_lowering() + backend()][:-2]  # every stage that is still BIR


def _modules() -> list[tuple[str, ModuleOp]]:
    return [
        ("matmul", matmul.trace(TensorSpec((256, 128), "bfloat16"), TensorSpec((256, 512), "bfloat16")).module),
        ("softmax", softmax.trace(TensorSpec((256, 300), "float32")).module),
    ]


def _round_trip(fn: bir.FunctionOp) -> None:
    text = bir_json.dumps(bir_json.function_to_json(fn))
    assert bir_json.function_text(fn) == text  # the writer penguin-to-bir uses, byte for byte
    back = bir_json.function_from_json(json.loads(text))
    back.verify()
    assert str(back) == str(fn)


@pytest.mark.parametrize("name,module", _modules())
def test_every_bir_stage_round_trips(name: str, module: ModuleOp) -> None:
    ctx = make_context()
    passes = frontend_lowering() + backend()
    for p in passes[: len(STAGES)]:
        p.apply(ctx, module)
        fns = [f for f in module.ops if isinstance(f, bir.FunctionOp)]
        assert fns, p.name
        for fn in fns:
            _round_trip(fn)


def test_carriers_round_trip() -> None:
    host = library.macro_module("softmax", [("x", (128, 64), "float32")], [("y", (128, 64), "float32")])
    fn = next(iter(host.ops))
    assert isinstance(fn, bir.FunctionOp)
    _round_trip(fn)  # holds an IT54
    module = softmax.trace(TensorSpec((128, 64), "float32")).module
    ctx = make_context()
    frontend_lowering()[0].apply(ctx, module)  # penguin-to-bir: an IT56
    (host2,) = [f for f in module.ops if isinstance(f, bir.FunctionOp)]
    _round_trip(host2)
    frontend_lowering()[1].apply(ctx, module)  # translate: an IT55
    for f in module.ops:
        _round_trip(f)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "doc,message",
    [
        ({"format": "other"}, "expected a nkic-bir-json/1 document"),
        ({"format": "nkic-bir-json/1", "op": "bir.nope"}, "not a BIR op"),
        ({"format": "nkic-bir-json/1", "op": "bir.memloc", "props": {}}, "not a bir.function"),
    ],
)
def test_malformed_documents_raise(doc: dict, message: str) -> None:
    with pytest.raises(bir_json.BirJsonError, match=message):
        bir_json.function_from_json(doc)
