"""Entry point of the policy pack: `pulumi preview --policy-pack policy` runs this file in the pack's own virtual
environment (policy/venv, from policy/requirements.txt) with the pack directory as the working directory.

The checks read the instance catalog, the trainer's flag parser and the sizing model from the project itself, so
the project root goes on the import path: the facts live in one place and the pack can never disagree with them.
"""

import sys
from pathlib import Path

# The project root (the parent of policy/), found from this file: nothing of the project can be imported before it
# is on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policy.pack import POLICIES

PolicyPack(name="fsdp-eks", policies=list(POLICIES), enforcement_level=EnforcementLevel.MANDATORY)
