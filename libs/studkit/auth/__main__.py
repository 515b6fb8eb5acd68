"""``python -m studkit.auth``: the documented command of the issuer tool, which lives above
studkit in :mod:`studtools.issuer`. This file only runs it: no module imports it (``import
studkit.auth`` never does), so the package itself still imports nothing above it
(``tests/unit/test_layers.py`` allows this one file and nothing else)."""

import sys

from studtools.issuer import main

if __name__ == "__main__":
    sys.exit(main())
