"""`python -m trainer` and `torchrun ... -m trainer`: see trainer/main.py for the launch commands."""

import sys

from trainer.main import main

sys.exit(main())
