"""Arguments torchrun's parser rejects end the launcher with EXIT_BAD_ARGUMENTS before anything starts: a TrainJob's
runtime fails the run on that code alone (workloads/job/trainjob.py)."""

from __future__ import annotations

import pytest

from trainer.base.pod.exits import EXIT_BAD_ARGUMENTS, is_retryable
from trainer.launch import launcher


def test_an_unknown_launcher_flag_exits_with_the_bad_arguments_code() -> None:
    with pytest.raises(SystemExit) as ended:
        launcher.main(["--no-such-flag", "-m", "trainer"])
    assert ended.value.code == EXIT_BAD_ARGUMENTS
    assert not is_retryable(EXIT_BAD_ARGUMENTS)
