"""``python -m labkit.cli``: the ``labkit`` command."""

import sys

from labkit.cli import main

sys.exit(main())
