"""The legacy (pre-0.3) NKI surface, ``neuronxcc.nki.*``: the same tracer and instructions as ``nki.*``, spelled the
old way. ``language`` adds the legacy-only names (index grids, ``par_dim``, ...) to ``nki.language``; ``isa`` gives
every instruction its value-returning legacy signature (``nisa.nc_matmul(a, b)`` returns a new tile) on top of the
dst-first ``nki.isa`` functions. Nothing here records instructions itself: each legacy call becomes modern calls.
"""
