"""`python -m worker`: run the rollwright worker (configured by ROLLWRIGHT_* variables)."""

from worker.main import main

raise SystemExit(main())
