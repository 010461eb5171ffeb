"""``nki.isa`` (nisa): the instructions, with NKI 0.3+ dst-first signatures.

Each instruction validates its operands on the views it is given — so errors name the user's line — and records one
penguin instruction through ``TraceContext.inst``. Keyword calls of every NKI version are accepted; stray keywords
(``dtype=``, ``name=``, ``priority=`` …) are tolerated and ignored; ``mask=`` restricts the instruction to the
mask's box of its operands (``frontend/grid.py``).

The instructions live in ``frontend/recorders/``, one module per instruction family; this module is their
public surface (what ``nki.isa`` is), and every name it exports says so in its ``__module__``.
"""

from nkic.frontend.control import VirtualRegister  # noqa: F401  (what nisa.register_alloc returns)
from nkic.frontend.instruction import NkiInstruction  # noqa: F401  (nisa.NkiInstruction, what nisa calls return)
from nkic.frontend.recorders.enums import (  # noqa: F401
    NkiValidationError,
    dge_mode,
    dma_engine,
    engine,
    get_nc_sub_version,
    get_nc_version,
    gpsimd_engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)
from nkic.frontend.recorders.movement import (  # noqa: F401
    dma_compute,
    dma_copy,
    dma_transpose,
    tensor_copy,
)
from nkic.frontend.recorders.pe import (  # noqa: F401
    nc_matmul,
    nc_matmul_mx,
    nc_transpose,
    quantize_mx,
)
from nkic.frontend.recorders.vector import (  # noqa: F401
    bn_aggr,
    bn_stats,
    reciprocal,
    scalar_tensor_tensor,
    tensor_partition_reduce,
    tensor_reduce,
    tensor_scalar,
    tensor_scalar_cumulative,
    tensor_scalar_reduce,
    tensor_tensor,
    tensor_tensor_scan,
)
from nkic.frontend.recorders.act import (  # noqa: F401
    activate2,
    activation,
    activation_reduce,
    exponential,
)
from nkic.frontend.recorders.select import (  # noqa: F401
    affine_select,
    iota,
    memset,
    range_select,
    select_reduce,
    tensor_copy_predicated,
)
from nkic.frontend.recorders.registers import (  # noqa: F401
    register_alloc,
    register_load,
    register_move,
    register_store,
)
from nkic.frontend.recorders.rng import (  # noqa: F401
    dropout,
    rand2,
    rand_get_state,
    rand_set_state,
    rng,
    set_rng_seed,
)
from nkic.frontend.recorders.topk import (  # noqa: F401
    max8,
    nc_find_index8,
    nc_match_replace8,
    nonzero_with_count,
    topk,
)
from nkic.frontend.recorders.gather import (  # noqa: F401
    local_gather,
    nc_n_gather,
    nc_stream_shuffle,
    sequence_bounds,
)
from nkic.frontend.recorders.lnc import (  # noqa: F401
    core_barrier,
    sendrecv,
)
from nkic.frontend.tensor import NkiTensor  # noqa: F401  (the tiles nisa calls take)
from nkic.frontend.unsupported import missing_names as _missing_names

# Names nkic lacks are placeholders that raise NkiError when called (``frontend/unsupported.py``).
__getattr__ = _missing_names("nki.isa")
