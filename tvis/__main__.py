"""`python -m tvis`: the same command line as `tvis` (what `torchrun -m tvis run` starts)."""

import sys

from tvis.cli import main

sys.exit(main())
