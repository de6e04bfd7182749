"""``python -m fabtest.cli ...`` is the ``fabtest`` command."""

import sys

from fabtest.cli import main

sys.exit(main())
