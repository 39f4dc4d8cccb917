"""``python -m evflow``: see :mod:`evflow.cli`."""

import sys

from .cli import main

sys.exit(main())
