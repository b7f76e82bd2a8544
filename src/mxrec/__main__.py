"""``python -m mxrec`` runs the command line."""

import sys

from mxrec.cli import main

sys.exit(main())
