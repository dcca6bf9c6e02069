"""`python -m sizing`: memory per GPU and expected throughput of a job, per sharding strategy (sizing/cli.py)."""

import sys

from sizing.cli import main

sys.exit(main())
