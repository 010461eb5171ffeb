// RUN: nkic-opt %s -p assign-engines --verify-diagnostics | filecheck %s

// A module that names a generation nkic does not know fails as a diagnostic, not a traceback.
// CHECK: unknown target 'gen9'

builtin.module attributes {nkic.target = "gen9"} {
  // expected-error {{unknown target 'gen9'}}
  bir.function @f attributes {inputs = [], outputs = []} {
    bir.memloc @x : sbuf [128, 512] float32
    bir.memloc @y : sbuf [128, 512] float32
    bir.tensor_copy dst @y[0 : [512, 128], [1, 512]], src @x[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "unassigned"}
  }
}
