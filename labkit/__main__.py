"""``python -m labkit``: the same command as ``labkit`` (see ``labkit.cli``)."""

import sys

from labkit.cli import main

sys.exit(main())
