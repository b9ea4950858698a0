"""``python -m scheduler.cli``: the ``reshape`` command (:func:`scheduler.cli.main`)."""

import sys

from scheduler.cli import main

sys.exit(main())
