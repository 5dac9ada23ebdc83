"""Command line: ``python -m advisors analyze|optimize|compare``."""

import sys

from advisors.cli import main

sys.exit(main())
