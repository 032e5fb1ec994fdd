"""`python -m accelmap.cli` runs the `accelmap` command."""

import sys

from accelmap.cli import main

sys.exit(main())
