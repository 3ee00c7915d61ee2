"""`python -m pstrain_launch` (with launcher/ on the path): the same as launcher/pstrain-launch,
e.g. `python -m pstrain_launch add-worker --train_dir runs/dist`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
