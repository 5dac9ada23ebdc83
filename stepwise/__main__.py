"""``python -m stepwise …``: the same as the ``stepwise`` command."""

from stepwise.command import main

main()
