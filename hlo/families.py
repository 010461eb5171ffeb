"""The op-by-op lowerings beyond ``tiles.SegmentInterpreter``'s own, one module per family, by op name.

``tiles.SegmentInterpreter.run`` looks an op up here when it has no ``op_<name>`` method of its own. Each family
module registers its lowerings with ``@lowering(name)``; a lowering takes the interpreter and the op (and records
the op's results in ``interp.values``), as the interpreter's own methods do.
"""

from __future__ import annotations

from nkic.hlo import common
from nkic.hlo import conv as _conv  # noqa: F401 — each module registers its lowerings on import
from nkic.hlo import fusion as _fusion  # noqa: F401
from nkic.hlo import gathers as _gathers  # noqa: F401
from nkic.hlo import layout as _layout  # noqa: F401
from nkic.hlo import loops as _loops  # noqa: F401
from nkic.hlo import movement as _movement  # noqa: F401
from nkic.hlo import reductions as _reductions  # noqa: F401
from nkic.hlo import scatter as _scatter  # noqa: F401
from nkic.hlo import sorting as _sorting  # noqa: F401
from nkic.hlo import views as _views  # noqa: F401
from nkic.hlo import windows as _windows  # noqa: F401

LOWERINGS = common.LOWERINGS
