"""Leaf utilities every layer may use: atomic, symlink-safe file writes (``safeio``), the garbage collector
paused around a trace or a compile (``gcpause``) and the registries' lazy loader (``lazy``). They import no xDSL
and no other nkic module, so the runtime, the frontend, the driver and the tools all stand above them."""
