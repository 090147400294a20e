"""`python -m kraft ...` runs the `kraft` command, as `python -m kraft.cli` does."""

import sys

from kraft.cli import main

sys.exit(main())
