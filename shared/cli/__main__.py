"""`python -m shared.cli`: the `rollwright` command without its console script."""

import sys

from shared.cli.main import main

sys.exit(main())
