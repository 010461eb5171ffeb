"""The ``xdsl.universe`` entry point: plain ``xdsl-opt`` sees nkic's dialects, passes and targets.

Loading the entry point is the only moment nkic gets control in ``xdsl-opt``, so this is where the passes get
``nkic.library``'s kernel resolver (as ``nkic-opt`` gives it), unless the process already installed one.
"""

from __future__ import annotations

from xdsl.universe import Universe

from nkic.dialects import get_all_dialects
from nkic.hlo import get_hlo_passes
from nkic.library import RESOLVER
from nkic.passes import get_all_passes
from nkic.passes.resolver import current_resolver, set_default_resolver
from nkic.tools.targets import get_all_targets

if current_resolver() is None:
    set_default_resolver(RESOLVER)

NKIC_UNIVERSE = Universe(
    all_dialects=get_all_dialects(),
    all_passes={**get_all_passes(), **get_hlo_passes()},
    all_targets=get_all_targets(),
)
