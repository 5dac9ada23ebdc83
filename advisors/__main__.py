"""Command line: ``python -m advisors analyze|optimize|compare``."""

import sys

from cli.head_start import head_start

head_start(sys.argv[1:])  # analyze FILE: the parse workers start while the analysis is imported

from cli.advisors import main  # noqa: E402

sys.exit(main())
