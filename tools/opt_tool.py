"""``nkic-opt``'s implementation: xdsl-opt with every nkic dialect, pass and target (``-p`` pipelines, ``-t neff -o
k.neff``). The command's entry point is ``nkic.tools.opt.main``, which imports this module under its Ctrl-C guard.

Passes plan for the generation the module names (``nkic.target``, stamped by the tracer; ``--generation GEN``
replaces it). The passes get ``nkic.library``'s kernel resolver, so internal kernel nodes and IT54 macros resolve as they do in
the driver.

As MLIR tools do, it reports bad input as a diagnostic (``file:line:col: error`` with the source line for parse
errors; the op and message for verifier and pass failures) on stderr with exit status 1, never a Python traceback
(an internal crash is one line, exit status 2; ``NKIC_TRACEBACK=1`` shows the traceback). With
``--verify-diagnostics``, ``// expected-error {{text}}`` in a chunk is an expectation: the chunk must fail with a
diagnostic containing ``text``, else the run exits 1.

``-o FILE`` is written atomically and never through a symbolic link (``nkic.support.safeio``), and only when the run
succeeds: a failing run leaves the previous FILE as it was. Ctrl-C prints ``nkic-opt: interrupted`` and exits 130; a
closed stdout (``nkic-opt k.mlir | head -1``) ends quietly with status 141, as the ``nkic`` command does.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import weakref
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Input, Span
from xdsl.xdsl_opt_main import xDSLOptMain

from nkic.support import safeio
from nkic.dialects import get_all_dialects
from nkic.dialects.common import stamp_target
from nkic.dialects.stablehlo import StableHloParser
from nkic.hlo import get_hlo_passes
from nkic.library import RESOLVER
from nkic.passes import get_all_passes
from nkic.passes.resolver import set_default_resolver
from nkic.target.machine import TARGET_ALIASES
from nkic.tools.cli import EXIT_INTERRUPTED, stdout_closed
from nkic.tools.targets import BINARY_TARGETS, get_all_targets


# Linear-time forms of what the MLIR lexer accepts: a comment, or a string literal whose escapes are \" \n \t \\
# or two hex digits, closed on its line. xDSL's own string regex backtracks exponentially on an unterminated
# string or a bad escape (a 60-byte file takes seconds, each further character doubles it), so every chunk is
# scanned with these first.
_COMMENT_OR_QUOTE = re.compile(r'//[^\n]*|"')
_STRING = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
_EXPECTED = re.compile(r"expected-error\s*\{\{(.*?)\}\}")


def check_string_literals(text: str, name: str) -> None:
    """Raise a ParseError at the first string literal that is unterminated or has an invalid escape."""
    pos = 0
    while (m := _COMMENT_OR_QUOTE.search(text, pos)) is not None:
        if m.group() != '"':
            pos = m.end()
            continue
        s = _STRING.match(text, m.start())
        if s is None:
            end = text.find("\n", m.start())
            span = Span(m.start(), len(text) if end < 0 else end, Input(text, name))
            raise ParseError(span, "unterminated string literal or invalid escape (valid: \\\" \\n \\t \\\\ \\XX)")
        pos = s.end()


class _PendingText(io.StringIO):
    """The text for ``-o FILE``, kept in memory until the run has succeeded (then ``NkicOptMain.run`` writes it with
    ``safeio``). xDSL closes its output stream in a ``finally``, success or not, so closing keeps the text."""

    def close(self) -> None:
        pass


class NkicOptMain(xDSLOptMain):
    version_format = "nkic-opt (xdsl {xdsl_version})"
    unmet_expectations = 0
    _pending: _PendingText | None = None

    def run(self) -> None:
        super().run()
        if self._pending is not None:
            safeio.write_text(self.args.output_file, self._pending.getvalue())

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        data = chunk.read()
        text = data.decode() if isinstance(data, bytes) else data
        check_string_literals(text, self.get_input_name())
        self._expected = [(start_offset + text.count("\n", 0, m.start()) + 1, m.group(1))
                          for m in _EXPECTED.finditer(text)]  # fmt: skip
        self._chunk_line = start_offset  # the chunk's first line in the file, 0-based: ops are located in the file
        try:
            return super().parse_chunk(io.BytesIO(text.encode()), file_extension, start_offset)
        except (ValueError, NotImplementedError, OverflowError) as e:
            # xDSL's parser builds some attributes without checking them first (array<i128: ...> has no struct
            # format, an i64 property given 2^64 ...): the input is malformed, not the tool broken.
            raise DiagnosticException(f"{self.get_input_name()}: malformed input: {e}") from None

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--generation", metavar="GEN", choices=sorted(TARGET_ALIASES), default=None,
            help="compile for this NeuronCore generation (gen2, trn1, ...): stamped on each module as nkic.target, "
                 "replacing the generation it was traced for; without it, passes plan for the module's own",
        )  # fmt: skip

    def apply_passes(self, prog: ModuleOp) -> None:
        if self.args.generation is not None:
            stamp_target(prog, TARGET_ALIASES[self.args.generation])
        try:
            super().apply_passes(prog)
        except DiagnosticException as e:
            self._check_expectations(str(e))
            raise
        self._check_expectations(None)

    def _check_expectations(self, message: str | None) -> None:
        """MLIR's --verify-diagnostics contract for chunks that state ``expected-error``."""
        expected, self._expected = getattr(self, "_expected", []), []
        if not self.args.verify_diagnostics or not expected:
            return
        missing = [(line, x) for line, x in expected if message is None or x not in message]
        for line, text in missing:
            print(f"{self.get_input_name()}:{line}: error: expected error \"{text}\" was not produced",
                  file=sys.stderr)  # fmt: skip
        self.unmet_expectations += len(missing)

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in get_all_dialects().items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        set_default_resolver(RESOLVER)
        for name, factory in {**get_all_passes(), **get_hlo_passes()}.items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            # MLIR's reading of a hex literal in a float dense attribute (the bits), which xDSL's parser lacks
            text = io.read().decode()
            parser = _LocatingParser(self.ctx, text, self.get_input_name(), getattr(self, "_chunk_line", 0) + 1)
            self.parsed = parser.parse_module(not self.args.no_implicit_module)
            return self.parsed

        self.available_frontends["mlir"] = parse_mlir

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets.update(get_all_targets())

    def _binary_target(self) -> bool:
        return parse_spec(self.args.target).name in BINARY_TARGETS

    def prepare_output(self) -> IO[str]:
        # Binary targets write their own file; stdout only gets a one-line summary.
        if self._binary_target() or self.args.output_file is None:
            return sys.stdout
        safeio.check_destination(self.args.output_file)  # before the passes: a link or a missing folder fails fast
        self._pending = _PendingText()
        return self._pending

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if not self._binary_target():
            return super().output_resulting_program(prog)
        spec = parse_spec(self.args.target)
        target = self.available_targets[spec.name]().from_spec(spec)
        if self.args.output_file is None:
            raise SystemExit(f"nkic-opt: -t {spec.name} writes a binary file; give it with -o FILE")
        data = target.to_bytes(self.ctx, prog)
        safeio.write_bytes(self.args.output_file, data)
        return f"wrote {len(data)} bytes to {self.args.output_file}\n"


# Where each parsed operation starts (``file:line:col``), so a verifier error names the op's line as MLIR tools do.
# Ops a pass creates have no entry: their errors keep xDSL's note, which shows the op in the printed module.
_OP_LOCATIONS: weakref.WeakKeyDictionary[Operation, str] = weakref.WeakKeyDictionary()


class _LocatingParser(StableHloParser):
    def parse_optional_operation(self) -> Operation | None:
        start = self._current_token.span
        op = super().parse_optional_operation()
        if op is not None:
            _OP_LOCATIONS[op] = start.get_location()
        return op


def _failing_op(module: ModuleOp) -> tuple[Operation, str] | None:
    """The innermost parsed op whose own verifier fails, with its message (ops are checked innermost first, as
    ``module.verify()`` reports the first failure it meets)."""
    for op in reversed(list(module.walk())):
        if op not in _OP_LOCATIONS:
            continue
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, ValueError) as e:
            return op, str(e).strip()
    return None


def _located(e: VerifyException, module: ModuleOp | None) -> str | None:
    """``file:line:col: error: 'op' op message`` for a verifier error of a parsed op, else None."""
    found = _failing_op(module) if module is not None else None
    if found is None:
        return None
    op, text = found
    return f"{_OP_LOCATIONS[op]}: error: '{op.name}' op {text or type(e).__name__}"


def _diagnostic(e: BaseException) -> str:
    if isinstance(e, ParseError):  # MLIR's form: the location and message first, then the line and the caret
        context = e.span.print_with_context().split("\n", 1)[1].rstrip("\n")
        return f"{e.span.get_location()}: error: {e.msg}\n{context}"
    text = str(e).strip() or type(e).__name__
    notes = "".join(f"\nnote: {n}" for n in getattr(e, "__notes__", []))
    return f"nkic-opt: error: {text}{notes}"


def main(args: list[str] | None = None) -> None:
    """The ``nkic-opt`` command; ``args`` replaces ``sys.argv[1:]`` (the IR fuzzer runs it in-process). Exits with
    ``SystemExit``: 1 for bad input, 2 for an internal error, 130 when interrupted, 141 when stdout was closed."""
    try:
        try:
            _main(args)
        except SystemExit:  # argparse's --help and usage errors: their output must reach a closed pipe here too
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a reader that went away shows here, inside the handlers, not in Python's exit
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            print("nkic-opt: interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        raise SystemExit(stdout_closed()) from None


def _main(args: list[str] | None) -> None:
    try:
        tool = NkicOptMain(args=args)  # parses the command line and the pass pipeline
    except (ValueError, ArgSpecParseError) as e:
        print(f"nkic-opt: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    try:
        tool.run()
    except VerifyException as e:
        located = _located(e, getattr(tool, "parsed", None))
        print(located or _diagnostic(e), file=sys.stderr)
        raise SystemExit(1) from None
    except (ParseError, DiagnosticException) as e:
        print(_diagnostic(e), file=sys.stderr)
        raise SystemExit(1) from None
    except safeio.OutputError as e:  # -o: one line naming the file and why
        print(f"nkic-opt: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except (KeyboardInterrupt, SystemExit, BrokenPipeError):  # main's to report
        raise
    except Exception as e:
        if os.environ.get("NKIC_TRACEBACK"):
            raise
        print(f"nkic-opt: internal error: {type(e).__name__}: {e} (NKIC_TRACEBACK=1 shows the traceback)",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2) from None
    if tool.unmet_expectations:
        raise SystemExit(1)

