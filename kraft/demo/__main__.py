"""``python -m kraft.demo``: run the main job."""

import sys

from kraft.demo.main_job import main

sys.exit(main())
