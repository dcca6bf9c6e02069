"""`python -m local --stack NAME`: run a stack's job on this machine (local/cli.py; `make demo` runs the dev
stack's)."""

from local.cli import main

raise SystemExit(main())
