"""Compile infrastructure: the driver (a traced kernel -> penguin -> bir -> ISA -> NEFF bytes, and running a NEFF)
and the content-addressed NEFF cache it compiles through. Not to be confused with ``nki.compiler``, the NKI
language's namespace (``frontend/compiler.py``)."""
