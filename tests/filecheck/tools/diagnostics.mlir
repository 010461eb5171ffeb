// RUN: not nkic-opt %S/Inputs/bad-escape.mlir 2>&1 | filecheck %s --check-prefix=ESCAPE
// RUN: not nkic-opt %S/Inputs/unterminated.mlir 2>&1 | filecheck %s --check-prefix=UNTERMINATED
// RUN: not nkic-opt %S/Inputs/truncated.mlir 2>&1 | filecheck %s --check-prefix=PARSE
// RUN: not nkic-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=VERIFY
// RUN: not nkic-opt %s --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=EXPECT
// RUN: not nkic-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=USAGE

// nkic-opt reports bad input as MLIR tools do: one `file:line:col: error: ...` diagnostic (or the verifier's message
// with the op), exit status 1, no Python traceback. A string literal that xDSL's lexer would take exponential time
// on (a bad escape, no closing quote) is refused up front, in linear time.
// ESCAPE: bad-escape.mlir:1:32: error: unterminated string literal or invalid escape
// ESCAPE-NOT: Traceback
// UNTERMINATED: unterminated.mlir:1:32: error: unterminated string literal
// PARSE: truncated.mlir:3:1: error:
// PARSE-NOT: Traceback
// VERIFY: diagnostics.mlir:28:5: error: 'bir.memloc' op a constant memloc, and only it, carries data
// VERIFY-NOT: Traceback
// USAGE: nkic-opt: error: Unrecognized passes: ['no-such-pass']

// With --verify-diagnostics, an expected-error annotation is a contract: the first chunk meets it, the second does
// not (its op verifies), so the run fails and names the missing diagnostic and its line.
// EXPECT-DAG: Operation does not verify: a constant memloc, and only it, carries data
// EXPECT-DAG: diagnostics.mlir:34: error: expected error "carries data" was not produced

// expected-error {{a constant memloc, and only it}}
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @c : shared_hbm [1, 1] float32 {kind = "constant"}
  }
}

// -----

// expected-error {{carries data}}
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @c : shared_hbm [1, 1] float32 {kind = "constant", data = "0x0000803f"}
  }
}
