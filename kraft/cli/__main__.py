import sys

from kraft.cli import main

sys.exit(main())
