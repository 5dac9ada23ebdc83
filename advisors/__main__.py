"""Command line: ``python -m advisors analyze|optimize|compare``."""

import sys

from cli.advisors import main

sys.exit(main())
