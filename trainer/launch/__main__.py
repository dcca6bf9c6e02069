"""`python -m trainer.launch [--stage-inputs] <torchrun's arguments>`: see trainer/launch/launcher.py."""

import sys

from trainer.launch.launcher import main

sys.exit(main())
