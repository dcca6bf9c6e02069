"""The launcher's staging step: `python -m trainer.launch --stage-inputs <torchrun's arguments> -m trainer <flags>`
stages the trainer's inputs (trainer/stage.py, with the trainer's own flags) before torchrun starts. Torch-free: the
manifest (workloads/job/pytorchjob.py) and the local run read the option from here.

Why in the main container and not in an init container: the Training Operator (kubeflow/trainer v1.9.4,
pkg/controller.v1/common/pod.go ReconcilePods) reads a failed pod's exit code only from its `pytorch` container; a
pod whose init container failed gets 0xbeef, which is retryable under restartPolicy ExitCode, so a staging failure
that no retry can cure (a gated model without a token, a data set that is not there) deleted and created the pod
again without end, holding every GPU node (local/pytorchjob/restart_policy.py models it). Run by the launcher, the
same failure ends the launcher with EXIT_STAGING_FAILED and a reason, and the operator fails the job.

Staging runs as a child process, `python -m trainer.stage`:
- with the hub reachable: the pod's environment keeps the workers offline (HF_HUB_OFFLINE=1,
  workloads/job/staging.py), and huggingface_hub reads that variable once, when it is imported
  (huggingface_hub/constants.py), so only a process of its own can be online while the workers are not;
- so that the memory of tokenising a data set goes back before training, not held by the launcher, the pod's main
  process, for the whole run;
- so that the launcher sees a crash (the OOM killer's SIGKILL) as a code, not as its own death.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

STAGE_INPUTS_OPTION = "--stage-inputs"
# The launcher's own options, before torchrun's arguments; each is a switch.
LAUNCHER_OPTIONS = (STAGE_INPUTS_OPTION,)
STAGE_MODULE = "trainer.stage"
TRAINER_MODULE = "trainer"
# The variables that keep the hub offline for the workers; staging is the step that downloads.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
# How long a staging child gets to stop after SIGTERM when the pod is being stopped: a download or tokenisation has
# nothing to settle (trainer/stage.py writes its marker last), so a few seconds, well inside the pod's grace period.
STOP_GRACE_S = 5.0


@dataclass(frozen=True)
class LauncherOptions:
    stage_inputs: bool = False


def split_launcher_options(argv: Sequence[str]) -> tuple[LauncherOptions, list[str]]:
    """The launcher's own options (leading switches) and torchrun's arguments after them."""
    argv = list(argv)
    seen = set()
    while argv and argv[0] in LAUNCHER_OPTIONS:
        seen.add(argv.pop(0))
    return LauncherOptions(stage_inputs=STAGE_INPUTS_OPTION in seen), argv


def trainer_flags(module: bool, script: str, script_args: Sequence[str]) -> list[str] | None:
    """The trainer's flags in torchrun's parsed arguments (`-m trainer <flags>`); None when it runs something else."""
    return list(script_args) if module and script == TRAINER_MODULE else None


def staging_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The launcher's environment (HF_HOME, ...) with the token it read from Secrets Manager (HF_TOKEN, which only
    staging gets) and the hub online."""
    environ = dict(os.environ if environ is None else environ)
    for name in OFFLINE_VARIABLES:
        environ.pop(name, None)
    return environ


@dataclass(frozen=True)
class Staged:
    """How the staging child ended: its return code (Python's: -N for signal N) and its last line on stderr."""

    returncode: int
    last_line: str


def stage_inputs(flags: Sequence[str], environ: dict[str, str] | None = None) -> Staged:
    """Run `python -m trainer.stage <flags>` to its end in `environ` (default: this process's; the launcher passes
    its own with the hub token added, trainer/launch/launcher.py), its stderr passed through (and its last line kept
    for the launcher's reason). Any exception here (the launcher's SignalException: the pod is being stopped) stops
    the child first and goes on."""
    child = subprocess.Popen(
        [sys.executable, "-m", STAGE_MODULE, *flags],
        env=staging_environment(environ),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    last = ""
    try:
        assert child.stderr is not None
        for line in child.stderr:
            sys.stderr.write(line)
            last = line.strip() or last
        child.wait()
    except BaseException:
        stop(child)
        raise
    sys.stderr.flush()
    return Staged(child.returncode, last)


def stop(child: subprocess.Popen[str]) -> None:
    child.terminate()
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    with contextlib.suppress(OSError):
        if child.stderr is not None:
            child.stderr.close()
