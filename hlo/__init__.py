"""The framework front door: StableHLO programs (from JAX, or a ``.mlir`` file) lowered to penguin.

``nkic.dialects.stablehlo`` reads the program; ``router`` routes attention and NKI custom calls to kernel nodes, one
pass per rule; ``lower`` cuts the function into kernel nodes and ``tiles`` lowers the op-by-op segments through the
NKI frontend. This layer sits beside ``frontend/``: it may import ``dialects/`` and ``frontend/``, never the compiler
(``passes/``), the runtime, the library or the tools; nothing below it imports it. Running a program (compile and
simulate) is ``nkic.framework``'s job.
"""
