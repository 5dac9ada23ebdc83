"""Command line: ``python -m profilers run|launch|list`` (the commands live in ``cli.profilers``)."""

import sys

from cli.profilers import main

sys.exit(main())
