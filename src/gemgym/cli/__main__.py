"""``python -m gemgym.cli``."""

import sys

from gemgym.cli import main

sys.exit(main())
