"""``python -m nkic SCRIPT.py [ARGS]``: run a script with ``import nki`` resolving to nkic (see ``tools/script.py``)."""

import sys

from nkic.tools.cli import default_blas_threads

# Before numpy loads (OpenBLAS reads its thread count then): the script runner imports the frontend, which loads it.
default_blas_threads()

from nkic.tools.script import main  # noqa: E402

sys.exit(main())
