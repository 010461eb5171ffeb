"""The kernel-node paths through BIR: FORM A vs FORM B carriers, internal registry kernels, IT54 macro kernels,
and compile-option decorators — each compiled to a NEFF and simulated."""

from __future__ import annotations

import numpy as np
import pytest

from nkic.dialects import bir, klir_binary, penguin
from nkic.compiler.driver import compile_module, compile_traced, make_context, run_neff
from nkic import api as nki
from nkic import library
from nkic.api.execute import simulate
from nkic.frontend import TensorSpec
from nkic.kernels.softmax import softmax
from nkic.passes.penguin_to_bir import PenguinToBirPass
from nkic.passes.translate_nki_ast_to_bir import TranslateNkiAstToBirPass

X = np.random.default_rng(7).standard_normal((256, 384), dtype=np.float32)


def _ops(module: object, cls: type) -> list:
    return [o for o in module.walk() if isinstance(o, cls)]  # type: ignore[attr-defined]


def test_form_a_and_form_b_carriers_lower_to_the_same_numbers() -> None:
    traced = softmax.trace(X)
    kinds = {}
    outs = {}
    for fmt in ("bir", "klir"):
        m = traced.module.clone()
        ctx = make_context()
        PenguinToBirPass(kernel_format=fmt).apply(ctx, m)
        (carrier,) = _ops(m, bir.NkiKlirKernelOp)
        assert carrier.kernel_format.data == fmt
        if fmt == "klir":
            assert carrier.klir_binary.data.startswith(klir_binary.DATA_PREFIX)
        TranslateNkiAstToBirPass().apply(ctx, m)
        (call,) = _ops(m, bir.NkiKernelOp)
        kinds[fmt] = call.kernel_source.data
        outs[fmt] = run_neff(compile_module(traced.module.clone(), kernel_format=fmt).neff, {"x": X}).outputs["out"]
    assert kinds == {"bir": "Beta3", "klir": "Beta2"}
    np.testing.assert_array_equal(outs["bir"], outs["klir"])


def test_form_b_function_is_taken_back_not_rebuilt_and_equals_the_parsed_one() -> None:
    """translate-nki-ast-to-bir reuses the function penguin-to-bir serialised (keyed by the payload's digest); it is
    the function the payload parses to, and a payload nobody remembered (or already taken) is parsed."""
    import json

    from nkic.dialects import bir_json

    m = softmax.trace(X).module.clone()
    ctx = make_context()
    PenguinToBirPass().apply(ctx, m)
    (carrier,) = _ops(m, bir.NkiKlirKernelOp)
    payload = carrier.klir_binary.data
    parsed = bir_json.function_from_json(json.loads(payload))
    built = bir_json.take_function(payload)
    assert built is not None and str(built) == str(parsed)
    assert bir_json.take_function(payload) is None  # taken once
    bir_json.remember_function(payload, built)
    TranslateNkiAstToBirPass().apply(ctx, m)
    (fn,) = [f for f in m.ops if isinstance(f, bir.FunctionOp) and f.sym_name.data != "main"][:1]
    assert fn is built
    m2 = softmax.trace(X).module.clone()
    PenguinToBirPass().apply(ctx, m2)
    bir_json.take_function(_ops(m2, bir.NkiKlirKernelOp)[0].klir_binary.data)  # forget it: translate parses
    TranslateNkiAstToBirPass().apply(ctx, m2)
    fns = [f for f in m2.ops if isinstance(f, bir.FunctionOp) and f.sym_name.data != "main"]
    assert [str(f) for f in fns] == [str(parsed)]


def test_nkab_round_trip_and_corruption() -> None:
    kernel = next(o for o in softmax.trace(X).module.ops if isinstance(o, penguin.KernelOp))
    data = klir_binary.encode_kernel(kernel)
    assert data[:4] == b"NKAB"
    assert str(klir_binary.decode_kernel(data)) == str(kernel)
    with pytest.raises(klir_binary.KlirBinaryError, match="truncated or corrupt"):
        klir_binary.decode_kernel(data[:-3])
    flipped = bytearray(data)
    flipped[40] ^= 0xFF
    with pytest.raises(klir_binary.KlirBinaryError):
        klir_binary.decode_kernel(bytes(flipped))


def test_kernel_format_decorator_selects_form_a() -> None:
    form_a = nki.compiler.kernel_format("klir")(softmax)
    assert form_a.options.carrier_format == "klir" and softmax.options.carrier_format == "bir"
    np.testing.assert_allclose(simulate(form_a)(X), simulate(softmax)(X), rtol=0, atol=0)


def test_enable_stack_allocator_reuses_memory_immediately() -> None:
    stacked = nki.compiler.enable_stack_allocator(softmax)
    assert stacked.options.enable_stack_allocator and stacked.func is softmax.func

    def sbuf_addresses(kernel: object) -> set[int]:
        m = compile_traced(kernel.trace(X)).module  # type: ignore[attr-defined]
        from nkic.dialects.isa import core_streams

        streams = core_streams(next(iter(m.ops)))  # type: ignore[arg-type]
        return {loc.addr for ops in streams.values() for op in ops for loc in op.locs.data if loc.mem == "sbuf"}

    assert len(sbuf_addresses(stacked)) < len(sbuf_addresses(softmax))
    np.testing.assert_array_equal(simulate(stacked)(X), simulate(softmax)(X))


def test_internal_kernel_node_resolves_from_the_registry() -> None:
    """A host graph node of kind "internal" names a registry kernel; penguin-to-bir traces it on demand."""
    t = "!penguin.tensor<shared_hbm, 256x384xf32>"
    text = f"""builtin.module {{
      penguin.graph @main {{
      ^bb0(%x: {t}):
        %y = penguin.kernel_node @softmax(%x) {{kind = "internal", grid = 1 : i64}} : ({t}) -> {t}
        penguin.graph_return %y : {t}
      }}
    }}"""
    from xdsl.parser import Parser

    module = Parser(make_context(), text).parse_module()
    out = run_neff(compile_module(module).neff, {"x": X}).outputs["out"]
    np.testing.assert_array_equal(out, simulate(softmax)(X))


def test_macro_it54_and_traced_it56_paths_agree() -> None:
    module = library.macro_module("softmax", [("x", X.shape, "float32")], [("y", X.shape, "float32")])
    (node,) = _ops(module, bir.BirKernelOp)
    assert node.kernel_name.data == "softmax"
    out = run_neff(compile_module(module).neff, {"x": X}).outputs["y"]
    np.testing.assert_array_equal(out, simulate(softmax)(X))


def test_unknown_library_kernel_is_a_clear_error() -> None:
    from xdsl.utils.exceptions import PassFailedException

    module = library.macro_module("softmax", [("x", X.shape, "float32")], [("y", X.shape, "float32")])
    (node,) = _ops(module, bir.BirKernelOp)
    node.properties["kernel_name"] = bir.StringAttr("nope")
    with pytest.raises(PassFailedException, match="unknown library kernel 'nope'"):
        compile_module(module)


_INTERNAL_SOFTMAX = """builtin.module {
  penguin.graph @main {
  ^bb0(%x: !penguin.tensor<shared_hbm, 256x384xf32>):
    %y = penguin.kernel_node @softmax(%x) {kind = "internal", grid = 1 : i64} : (!penguin.tensor<shared_hbm, 256x384xf32>) -> !penguin.tensor<shared_hbm, 256x384xf32>
    penguin.graph_return %y : !penguin.tensor<shared_hbm, 256x384xf32>
  }
}"""


def test_passes_without_a_kernel_resolver_name_the_kernel() -> None:
    """Passes never import the library: with no resolver handed in, they fail clearly instead of importing."""
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import PassFailedException

    from nkic.passes.inline_bir_kernel import InlineBirKernelPass
    from nkic.passes.resolver import set_default_resolver

    macro = library.macro_module("softmax", [("x", X.shape, "float32")], [("y", X.shape, "float32")])
    internal = Parser(make_context(), _INTERNAL_SOFTMAX).parse_module()
    previous = set_default_resolver(None)
    try:
        with pytest.raises(PassFailedException, match="inline-bir-kernel: cannot resolve library kernel 'softmax'"):
            InlineBirKernelPass().apply(make_context(), macro)
        with pytest.raises(PassFailedException, match="penguin-to-bir: cannot resolve library kernel 'softmax'"):
            PenguinToBirPass().apply(make_context(), internal)
    finally:
        set_default_resolver(previous)


def test_passes_use_the_resolver_they_are_handed() -> None:
    """Any KernelResolver works: here one that serves every name with the library's softmax."""
    from xdsl.parser import Parser

    from nkic.passes.resolver import use_resolver

    asked: list[str] = []

    class Renaming:
        def resolve_penguin(self, name, inputs, attrs):  # type: ignore[no-untyped-def]
            asked.append(name)
            return library.RESOLVER.resolve_penguin("softmax", inputs, attrs)

        def resolve_bir(self, name, srcs_shape, dsts_shape, attrs):  # type: ignore[no-untyped-def]
            asked.append(name)
            return library.RESOLVER.resolve_bir("softmax", srcs_shape, dsts_shape, attrs)

    text = _INTERNAL_SOFTMAX.replace("@softmax", "@my_softmax")
    with use_resolver(Renaming()):  # the scoped form
        PenguinToBirPass().apply(make_context(), Parser(make_context(), text).parse_module())
    assert asked == ["my_softmax"]
    module = Parser(make_context(), text).parse_module()
    out = run_neff(compile_module(module, resolver=Renaming()).neff, {"x": X}).outputs["out"]  # the driver's
    assert asked == ["my_softmax", "my_softmax"]
    np.testing.assert_array_equal(out, simulate(softmax)(X))


def test_tracespec_inputs_compile_without_data() -> None:
    """Placeholders are enough to get a whole NEFF: the 1024-byte header (pkg_version 1 = tgz + SHA-256, the header
    size, the payload size, NEFF version 2.0) in front of a gzip payload whose hash the header holds."""
    import hashlib
    import struct

    from nkic.runtime.neff import HEADER_SIZE, parse_header, read_neff

    traced = softmax.trace(TensorSpec((128, 64), "float32"))
    neff = compile_traced(traced).neff
    pkg, hsize, dsize, major, minor = struct.unpack_from("<QQQQQ", neff)
    assert (pkg, hsize, major, minor) == (1, HEADER_SIZE, 2, 0) and HEADER_SIZE == 1024
    assert dsize == len(neff) - HEADER_SIZE > 0
    assert neff[HEADER_SIZE : HEADER_SIZE + 2] == b"\x1f\x8b"  # the gzip magic
    header = parse_header(neff)
    assert header["hash"] == hashlib.sha256(neff[HEADER_SIZE:]).hexdigest() and header["name"] == "softmax"
    assert [v.name for v in read_neff(neff).variables if v.kind == "input"] == ["x"]


def test_attention_macro_it54_and_traced_nki_kernel_agree() -> None:
    """The same flash attention as a library macro (IT54, inline-bir-kernel) and as a traced @nki.jit kernel
    (IT56 -> IT55 -> inline-nki-kernel) gives identical numbers."""
    import ml_dtypes

    from nkic.kernels.flash_attention import flash_attention

    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((1, 256, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    shape = (1, 256, 64)
    module = library.macro_module(
        "flash_attention", [(n, shape, "bfloat16") for n in "qkv"], [("o", shape, "bfloat16")],
        scale=0.125, is_causal=True,
    )  # fmt: skip
    (node,) = _ops(module, bir.BirKernelOp)
    assert node.is_causal is not None and node.is_causal.value.data == 1
    macro = run_neff(compile_module(module).neff, {"q": q, "k": k, "v": v}).outputs["o"]
    traced = simulate(flash_attention)(q, k, v, scale=0.125, causal_mask=True)
    np.testing.assert_array_equal(macro, traced)
