"""Command line: ``python -m advisors analyze|optimize``."""

import sys

from advisors.cli import main

sys.exit(main())
