"""``nkic-opt``: xdsl-opt with every nkic dialect, pass and target (``-p`` pipelines, ``-t neff -o k.neff``).

The passes get ``nkic.library``'s kernel resolver, so internal kernel nodes and IT54 macros resolve as they do in
the driver.
"""

from __future__ import annotations

import sys
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.arg_spec import parse_spec
from xdsl.xdsl_opt_main import xDSLOptMain

from nkic.dialects import get_all_dialects
from nkic.library import RESOLVER
from nkic.passes import get_all_passes
from nkic.passes.resolver import set_default_resolver
from nkic.tools.targets import BINARY_TARGETS, get_all_targets


class NkicOptMain(xDSLOptMain):
    version_format = "nkic-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in get_all_dialects().items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        set_default_resolver(RESOLVER)
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets.update(get_all_targets())

    def _binary_target(self) -> bool:
        return parse_spec(self.args.target).name in BINARY_TARGETS

    def prepare_output(self) -> IO[str]:
        # Binary targets write their own file; stdout only gets a one-line summary.
        return sys.stdout if self._binary_target() else super().prepare_output()

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if not self._binary_target():
            return super().output_resulting_program(prog)
        spec = parse_spec(self.args.target)
        target = self.available_targets[spec.name]().from_spec(spec)
        if self.args.output_file is None:
            raise SystemExit(f"nkic-opt: -t {spec.name} writes a binary file; give it with -o FILE")
        data = target.to_bytes(self.ctx, prog)
        with open(self.args.output_file, "wb") as f:
            f.write(data)
        return f"wrote {len(data)} bytes to {self.args.output_file}\n"


def main() -> None:
    NkicOptMain().run()


if __name__ == "__main__":
    main()
