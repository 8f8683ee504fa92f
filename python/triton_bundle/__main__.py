"""python -m triton_bundle, and python3 python/triton_bundle from the
repository: the command line (triton_bundle.cli)."""

import os
import sys

if not __package__:
    # run as a directory: sys.path[0] is this package's own directory, where
    # its modules would import as top-level ones; import the package instead
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        sys.path[0] = os.path.dirname(here)
    else:
        sys.path.insert(0, os.path.dirname(here))

from triton_bundle.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
