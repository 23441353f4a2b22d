"""`python -m vismerch.cli`: the same entry point as the `vismerch` script."""

import sys

from vismerch.cli import main

sys.exit(main())
