"""Command line: ``python -m advisors analyze|optimize|compare``."""

import sys

from cli.head_start import finish, head_start

head_start(sys.argv[1:])  # analyze FILE: the parse workers start while the analysis is imported

from cli.advisors import main  # noqa: E402

finish(main, sys.argv[1:])
