"""The ``xdsl.universe`` entry point: plain ``xdsl-opt`` sees nkic's dialects, passes and targets."""

from __future__ import annotations

from xdsl.universe import Universe

from nkic.dialects import get_all_dialects
from nkic.passes import get_all_passes
from nkic.tools.targets import get_all_targets

NKIC_UNIVERSE = Universe(
    all_dialects=get_all_dialects(),
    all_passes=get_all_passes(),
    all_targets=get_all_targets(),
)
