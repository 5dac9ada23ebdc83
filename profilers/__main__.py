"""Command line: ``python -m profilers run|launch|list`` (the commands live in ``cli.profilers``)."""

import sys

from cli.head_start import finish
from cli.profilers import main

finish(main, sys.argv[1:])  # exits with main's code; a closed pipe (list | head) is not a traceback
