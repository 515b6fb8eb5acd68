"""``python -m studkit.auth``: the issuer tool (:mod:`studkit.auth.tool`)."""

import sys

from studkit.auth.tool import main

if __name__ == "__main__":
    sys.exit(main())
