"""The subset of StableHLO that nkic's framework front door reads (``nkic.hlo``).

xDSL 0.74 has no StableHLO dialect (``xdsl-jax`` pins an older xDSL), so this is nkic's own: the ops that
``jax.jit(f).lower(*args).as_text()`` emits for norms, MLPs, attention, logsumexp, top-k/sort, cumsum, scatter,
loops, convolutions and KV-cache steps, in MLIR's generic form (what ``get_asm(print_generic_op_form=True)``
prints) and in the pretty form StableHLO gives each op (JAX prints sort, reduce_window, scatter and gather
generically), plus the ``chlo`` ops JAX emits by default (``Chlo``; ``nkic.hlo.chlo_legalize`` decomposes them). Every op keeps its operands, results and attributes exactly as StableHLO defines them; verification checks
the shape rules the lowering relies on (element-wise shapes, broadcast/transpose/reshape/dot dimensions).

``parse_stablehlo(text)`` is the parse boundary: it reads hex float literals as bit patterns. MLIR prints a
non-finite float splat as its bits (``dense<0xFF800000> : tensor<f32>`` is −inf, ``dense<0xFF80> : tensor<bf16>``
too); xDSL 0.74 reads the hex token as an integer and converts it to a float (4.28e9).

The package is split by op family: ``attributes`` (attributes and value helpers), ``syntax`` (the base op and the
pretty-form readers/printers the ops share), ``elementwise``, ``movement`` (shape and data movement), ``compute``
(dot_general, reduce, sort, reduce_window, convolution), ``control`` (return, calls, while, case), ``chlo`` and
``parse`` (the dialects and the parse boundary). This module re-exports their public names.
"""

from __future__ import annotations

from nkic.dialects.stablehlo.attributes import (
    ComparisonDirectionAttr,
    ComparisonTypeAttr,
    ConvAttr,
    DotAlgorithmAttr,
    DotAttr,
    GatherAttr,
    PrecisionAttr,
    ScatterAttr,
    dense_to_numpy,
    i64_array,
    int_list,
    numpy_dtype,
    parse_conv_layouts,
    shape_of,
    ttype,
)
from nkic.dialects.stablehlo.elementwise import (
    BINARY,
    ClampOp,
    CompareOp,
    ConstantOp,
    ELEMENTWISE,
    IsFiniteOp,
    SelectOp,
    UNARY,
)
from nkic.dialects.stablehlo.movement import (
    BroadcastInDimOp,
    ConcatenateOp,
    ConvertOp,
    DynamicSliceOp,
    DynamicUpdateSliceOp,
    GatherOp,
    IotaOp,
    PadOp,
    ReshapeOp,
    ReverseOp,
    ScatterOp,
    SliceOp,
    TransposeOp,
)
from nkic.dialects.stablehlo.compute import (
    ConvolutionOp,
    DotGeneralOp,
    ReduceOp,
    ReduceWindowOp,
    SortOp,
    pairs_attr,
)
from nkic.dialects.stablehlo.control import (
    CaseOp,
    CompositeOp,
    CustomCallOp,
    OptimizationBarrierOp,
    ReturnOp,
    WhileOp,
)
from nkic.dialects.stablehlo.chlo import (
    Chlo,
    ChloErfInvOp,
    ChloErfOp,
    ChloErfcOp,
    ChloSquareOp,
    ChloTopKOp,
)
from nkic.dialects.stablehlo.parse import (
    MLIR_LOC,
    StableHLO,
    StableHloParser,
    mlir_location,
    parse_stablehlo,
    source_location,
    stablehlo_context,
)

__all__ = [
    "BINARY",
    "BroadcastInDimOp",
    "CaseOp",
    "Chlo",
    "ChloErfInvOp",
    "ChloErfOp",
    "ChloErfcOp",
    "ChloSquareOp",
    "ChloTopKOp",
    "ClampOp",
    "CompareOp",
    "ComparisonDirectionAttr",
    "ComparisonTypeAttr",
    "CompositeOp",
    "ConcatenateOp",
    "ConstantOp",
    "ConvAttr",
    "ConvertOp",
    "ConvolutionOp",
    "CustomCallOp",
    "DotAlgorithmAttr",
    "DotAttr",
    "DotGeneralOp",
    "DynamicSliceOp",
    "DynamicUpdateSliceOp",
    "ELEMENTWISE",
    "GatherAttr",
    "GatherOp",
    "IotaOp",
    "IsFiniteOp",
    "MLIR_LOC",
    "OptimizationBarrierOp",
    "PadOp",
    "PrecisionAttr",
    "ReduceOp",
    "ReduceWindowOp",
    "ReshapeOp",
    "ReturnOp",
    "ReverseOp",
    "ScatterAttr",
    "ScatterOp",
    "SelectOp",
    "SliceOp",
    "SortOp",
    "StableHLO",
    "StableHloParser",
    "TransposeOp",
    "UNARY",
    "WhileOp",
    "dense_to_numpy",
    "i64_array",
    "int_list",
    "mlir_location",
    "numpy_dtype",
    "pairs_attr",
    "parse_conv_layouts",
    "parse_stablehlo",
    "shape_of",
    "source_location",
    "stablehlo_context",
    "ttype",
]
