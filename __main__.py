"""``python -m nkic SCRIPT.py [ARGS]``: run a script with ``import nki`` resolving to nkic (see ``tools/script.py``)."""

import sys

from nkic.tools.script import main

sys.exit(main())
