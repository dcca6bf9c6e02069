"""trainer/base/pod/parent_death.py: a process that ends with its owner, and never while its owner lives."""

from __future__ import annotations

import os
import subprocess
import sys

from stack.paths import PROJECT_ROOT
from trainer.base.pod.parent_death import parent_of, proc_is_this_namespaces

# A worker forked by a child of its owner, as a fork server's workers are: it arms the watch, says whether it still
# runs, and waits; its owner then ends.
GRANDCHILD_OF_ITS_OWNER = """
import os, sys, time
from trainer.base.pod.parent_death import end_with_owner
owner = os.getpid()
if os.fork() == 0:          # the helper (a fork server's place)
    if os.fork() == 0:      # the worker
        print("watching", end_with_owner(owner), flush=True)
        time.sleep(60)
        print("outlived its owner", flush=True)
        os._exit(0)
    os.wait()
    os._exit(0)
time.sleep(1)
"""


def test_parent_links_are_read_from_this_namespaces_proc() -> None:
    assert proc_is_this_namespaces()
    assert parent_of(os.getpid()) == os.getppid()
    assert parent_of(2**22 + 1) is None  # beyond Linux's largest pid: no such process


def test_a_worker_whose_owner_lives_keeps_running_and_ends_when_the_owner_ends() -> None:
    run = subprocess.run(
        [sys.executable, "-c", GRANDCHILD_OF_ITS_OWNER], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=30
    )
    assert run.stdout == "watching True\n"  # armed, and not ended at once although its owner is not its parent
    assert "ends: its owner" in run.stderr  # it ended with its owner, long before its 60 s sleep, saying why
