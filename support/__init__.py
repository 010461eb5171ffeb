"""Leaf utilities every layer may use: atomic, symlink-safe file writes (``safeio``) and the garbage collector
paused around a trace or a compile (``gcpause``). They import no xDSL and no other nkic module, so the runtime, the
frontend, the driver and the tools all stand above them."""
