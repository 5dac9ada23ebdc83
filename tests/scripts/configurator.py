"""nanoGPT's configurator, as its scripts read it: ``--key=value`` overrides a global of the script."""

import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if "=" not in arg:
        continue  # nanoGPT reads a config file here; these tests pass none
    assert arg.startswith("--")
    key, val = arg.split("=", 1)
    key = key[2:]
    if key in globals():
        try:
            attempt = literal_eval(val)
        except (SyntaxError, ValueError):
            attempt = val
        assert type(attempt) == type(globals()[key])
        globals()[key] = attempt
    else:
        raise ValueError(f"Unknown config key: {key}")
