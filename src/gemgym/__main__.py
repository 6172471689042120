"""``python -m gemgym`` runs the ``gemgym`` command."""

import sys

from gemgym.cli import main

sys.exit(main())
