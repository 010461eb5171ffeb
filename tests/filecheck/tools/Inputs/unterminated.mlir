builtin.module attributes {a = "never closed
}
