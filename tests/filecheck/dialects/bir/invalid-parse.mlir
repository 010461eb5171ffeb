// RUN: not nkic-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=WIDE
// RUN: not nkic-opt %S/Inputs/i128-array.mlir 2>&1 | filecheck %s --check-prefix=I128
// RUN: not nkic-opt %S/Inputs/i32-address.mlir 2>&1 | filecheck %s --check-prefix=I32

// Shapes and addresses are i64: a wider literal is a parse error at the literal, an i128 array (which xDSL's parser
// cannot build) a one-line diagnostic, an i32 array a verifier error; never a Python traceback.
// WIDE: invalid-parse.mlir:11:32: error: integer 18446744073709551616 does not fit in 64 bits
// WIDE-NOT: Traceback
builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 18446744073709551616] float32
  }
}
// I128: nkic-opt: error: {{.*}}i128-array.mlir: malformed input: Format not implemented for i128
// I128-NOT: Traceback
// I32: i32-address.mlir:3:5: error: 'bir.memloc' op Expected attribute i64 but got i32
// I32-NOT: Traceback
