"""One local run of a stack's job: render, start etcd and the agents, watch, inject the drill, report.

Used by the CLI (local/cli.py) and the end-to-end tests. `run_local` raises LocalRunError for bad input
before anything is started, and stops every process it started on every way out (success, failure, Ctrl-C).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

from local.agents import WorkerPods
from local.config import MAX_LOCAL_NODES, LocalJobOptions, Override, local_stack_config
from local.drills import Drill, DrillError, DrillReport, Trigger
from local.etcd import EtcdError, LocalEtcd, free_port, is_healthy
from local.launch import LocalPlan, ManifestError, local_plan
from local.pytorchjob_webhook import AdmissionDeniedError, admit_pytorchjob
from local.report import MetricsFollower, Record, Summary, progress_line, summarize, write_chart
from stack.config import StackConfig
from stack.fields import ConfigError
from stack.paths import PROJECT_ROOT
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

POLL_S = 0.1  # how often pods, metrics and drills are looked at: short, so a drill lands right after its trigger
DEFAULT_TIMEOUT_S = 1800.0
QUIET_NOTE_S = 15.0
# What a quiet spell usually is: after a lost node, torch's dynamic rendezvous first lets the node's keep-alives
# expire (3 x 5 s), then waits last_call_timeout (30 s) for more nodes before it settles on fewer.
WAITING_HINT = "the agents are starting or re-forming the rendezvous (see the logs for details)"


class LocalRunError(ValueError):
    """Bad input: the message says what is wrong and what to do; nothing was left running."""


@dataclass(frozen=True)
class LocalOptions:
    stack: str = "dev"
    job: LocalJobOptions = field(default_factory=LocalJobOptions)
    work_dir: Path | None = None  # default: runs/local/<job>-<time> in the project (git-ignored)
    etcd_port: int | None = None  # for the etcd started here; default a free one
    etcd_endpoint: str | None = None  # HOST:PORT of a running etcd to use instead of starting one
    etcd_binary: str | None = None
    drill: str | None = None
    trigger: Trigger = field(default_factory=Trigger)
    drill_pod: int = -1
    timeout_s: float = DEFAULT_TIMEOUT_S
    echo: Callable[[str], None] = print


@dataclass
class LocalResult:
    succeeded: bool
    reason: str
    work_dir: Path
    plan: LocalPlan
    records: list[Record]
    summary: Summary | None
    chart: Path | None
    drill: DrillReport | None
    pod_restarts: int
    elapsed_s: float

    @property
    def checkpoint_dir(self) -> Path | None:
        directory = self.plan.trainer.checkpoint.directory
        return Path(directory) if directory else None

    @property
    def metrics_file(self) -> Path | None:
        file = self.plan.trainer.metrics.file
        return Path(file) if file else None


def with_drill_defaults(options: LocalOptions) -> LocalOptions:
    """kill-agent needs a survivor: unless told otherwise, run two agents, elastic down to one."""
    job = options.job
    if options.drill == "kill-agent":
        job = replace(job, nodes=job.nodes or 2, min_nodes=job.min_nodes or 1)
    return replace(options, job=job)


def render_manifest(options: LocalOptions) -> tuple[dict[str, Any], list[Override]]:
    """The stack's PyTorchJob for this machine, admitted as the Training Operator's webhook admits it
    (local/pytorchjob_webhook.py); bad stack names and configs, and a refused job, become LocalRunError."""
    config, overrides = local_config(options)
    manifest = pytorchjob_manifest(job_spec(config))
    try:
        admit_pytorchjob(manifest)
    except AdmissionDeniedError as refused:
        raise LocalRunError(f"{manifest['metadata']['name']}: {refused}") from None
    return manifest, overrides


def local_config(options: LocalOptions) -> tuple[StackConfig, list[Override]]:
    """The stack's config for this machine; bad stack names and configs become LocalRunError."""
    nodes = options.job.nodes
    if nodes is not None and not 1 <= nodes <= MAX_LOCAL_NODES:
        raise LocalRunError(f"--nodes {nodes}: expected 1 to {MAX_LOCAL_NODES} agents on one machine")
    try:
        config, overrides = local_stack_config(options.stack, options.job)
    except FileNotFoundError as error:
        raise LocalRunError(str(error)) from None
    except ConfigError as error:
        raise LocalRunError(f"stack {options.stack} with the local changes: {error}") from None
    if not config.job.enabled:
        raise LocalRunError(f"stack {options.stack} has job.enabled false: there is no job to run")
    return config, overrides


def check_etcd(options: LocalOptions) -> None:
    """Refuse a missing etcd, one without the v2 API, a busy --etcd-port or a silent --etcd-endpoint before the
    run creates anything."""
    if options.etcd_endpoint:
        if not is_healthy(f"http://{options.etcd_endpoint}"):
            raise LocalRunError(f"--etcd-endpoint {options.etcd_endpoint}: no etcd with the v2 API answers there")
        return
    try:
        LocalEtcd.preflight(options.etcd_port, options.etcd_binary)
    except EtcdError as error:
        raise LocalRunError(str(error)) from None


def start_etcd(options: LocalOptions, log_path: Path) -> LocalEtcd | None:
    """Start the local etcd; None with --etcd-endpoint (that etcd is not ours to start or stop)."""
    if options.etcd_endpoint:
        return None
    try:
        return LocalEtcd.start(options.etcd_port, options.etcd_binary, log_path)
    except EtcdError as error:
        raise LocalRunError(str(error)) from None


def shorter_paths(text: str, work_dir: Path) -> str:
    """The run's absolute directory shown relative to the current one, where it lies below it."""
    try:
        relative = work_dir.resolve().relative_to(Path.cwd())
    except ValueError:
        return text
    return text.replace(str(work_dir.resolve()), str(relative))


def header(options: LocalOptions, plan: LocalPlan, overrides: list[Override], endpoint: str, work_dir: Path) -> str:
    nproc = plan.cluster_nproc_per_node
    reduced = "" if nproc == 1 else f" (nprocPerNode is {nproc} on the cluster, one per GPU; reduced to 1 here)"
    lines = [
        f"local run of stack {options.stack}: PyTorchJob {plan.job}, {plan.replicas} worker replica(s) -> "
        f"{plan.replicas} torchrun agent(s) with 1 worker process each{reduced}",
        f"  rendezvous: etcd-v2 at {endpoint}, id {plan.rendezvous_id}",
        f"  rank 0's Prometheus metrics: http://{plan.trainer.metrics.host}:{plan.trainer.metrics.port}/metrics",
        f"  files: {work_dir}",
        "  changed for this machine:",
        *(f"    {override.describe()}" for override in overrides),
        *(f"    {change}" for change in plan.changes),
    ]
    return shorter_paths("\n".join(lines), work_dir)


def footer(result: LocalResult) -> str:
    state = "succeeded" if result.succeeded else f"FAILED: {result.reason}"
    lines = [f"== {result.plan.job} {state} in {result.elapsed_s:.0f} s"]
    if result.summary:
        lines += [f"  {line}" for line in result.summary.lines()]
    lines.append(f"  pod restarts (restartPolicy {result.plan.restart_policy}): {result.pod_restarts}")
    if result.drill:
        drill = result.drill
        repeats = f", {drill.repeats} times" if drill.repeats > 1 else ""
        lines.append(
            f"  drill: {drill.drill} at step {drill.at_step}{repeats}, newest checkpoint then: {drill.checkpoint_step}"
        )
    lines += [
        f"  checkpoints:    {result.checkpoint_dir}",
        f"  metrics:        {result.metrics_file}",
        f"  chart:          {result.chart}",
        f"  model export:   {result.plan.trainer.checkpoint.export_hf}",
        f"  logs:           {result.work_dir / 'logs'}",
    ]
    return shorter_paths("\n".join(lines), result.work_dir)


def run_local(options: LocalOptions) -> LocalResult:
    """Run the job to the end; raises LocalRunError for bad input before anything is started."""
    options = with_drill_defaults(options)
    manifest, overrides = render_manifest(options)
    policy = manifest["spec"]["elasticPolicy"]
    drill = None
    if options.drill:
        try:
            nodes = range(policy["minReplicas"], policy["maxReplicas"] + 1)
            drill = Drill(options.drill, options.trigger, nodes, not options.etcd_endpoint, options.drill_pod)
        except DrillError as error:
            raise LocalRunError(str(error)) from None
    check_etcd(options)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    default_dir = PROJECT_ROOT / "runs" / "local" / f"{manifest['metadata']['name']}-{stamp}"
    work_dir = (options.work_dir or default_dir).resolve()  # the agents run in the project root, not here
    (work_dir / "logs").mkdir(parents=True, exist_ok=True)
    (work_dir / "pytorchjob.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    etcd = start_etcd(options, work_dir / "logs" / "etcd.log")
    try:
        endpoint = etcd.endpoint if etcd else str(options.etcd_endpoint)
        try:
            plan = local_plan(manifest, work_dir, endpoint, metrics_port=free_port())
        except ManifestError as error:
            raise LocalRunError(f"the stack's manifest: {error}") from None
        options.echo(header(options, plan, overrides, endpoint, work_dir))
        if drill:
            options.echo(f"  drill: {drill.describe(plan.job)}")
        return supervise(options, plan, PodRestarts(), drill, work_dir, etcd)
    finally:
        if etcd:
            etcd.stop()


def watch(
    options: LocalOptions, plan: LocalPlan, pods: WorkerPods, follower: MetricsFollower, etcd: LocalEtcd | None,
    drill: Drill | None,
) -> str:  # fmt: skip
    """Poll pods, metrics and the drill until every pod is done; returns why it stopped early ("" if it did not)."""
    started = quiet_since = time.monotonic()
    checkpoint_dir = Path(plan.trainer.checkpoint.directory) if plan.trainer.checkpoint.directory else None
    while not pods.finished:
        for event in pods.poll():
            options.echo(f"[{event.pod}] {event.what}")
        records = follower.poll()
        for record in records:
            options.echo(progress_line(record, plan.trainer.schedule.steps))
        now = time.monotonic()
        if records:
            quiet_since = now
        elif now - quiet_since > QUIET_NOTE_S:
            options.echo(f"  ... no new step for {now - quiet_since:.0f} s; {WAITING_HINT}")
            quiet_since = now
        last_step = follower.records[-1]["step"] if follower.records else 0
        fired = drill.poll(pods, etcd, checkpoint_dir, last_step) if drill else ""
        if fired:
            options.echo(f"[drill] {fired} (leader at step {last_step})")
        if now - started > options.timeout_s:
            return f"timed out after {options.timeout_s:.0f} s"
        time.sleep(POLL_S)
    return ""


@dataclass(frozen=True)
class AfterFailure:
    """What the job's controller does once an attempt has stopped on a failure: start every pod again on `plan`, or,
    with plan None, end the job for `reason`."""

    plan: LocalPlan | None
    reason: str = ""


class RestartRule(Protocol):
    """How the job's controller restarts after a failed pod (workloads/job/api.py RestartScope): within an attempt,
    through the pods it makes (`pods`), and between attempts (`after_failure`)."""

    chart_title: str  # after the job's name on the chart

    def pods(self, plan: LocalPlan, log_dir: Path) -> WorkerPods:
        """One attempt's pods, not yet started."""
        ...

    def after_failure(self, pods: WorkerPods, plan: LocalPlan, drill: Drill | None) -> AfterFailure: ...

    def pod_restarts(self, pods: WorkerPods, plan: LocalPlan) -> int:
        """Restarts and re-creations of all pods together, over every attempt."""
        ...


class PodRestarts:
    """The Training Operator's rule for a PyTorchJob (restartPolicy ExitCode): each pod is restarted or created again
    on its own within the one attempt (local/agents.py WorkerPods); a failure that stops the attempt ends the job."""

    chart_title = "(local)"

    def pods(self, plan: LocalPlan, log_dir: Path) -> WorkerPods:
        return WorkerPods(plan.agents, log_dir, plan.backoff_limit, plan.restart_policy)

    def after_failure(self, pods: WorkerPods, plan: LocalPlan, drill: Drill | None) -> AfterFailure:
        return AfterFailure(None, pods.failure or "; ".join(f"{pod.name} {pod.phase.value}" for pod in pods.pods))

    def pod_restarts(self, pods: WorkerPods, plan: LocalPlan) -> int:
        return pods.restarts


def supervise(
    options: LocalOptions,
    plan: LocalPlan,
    rule: RestartRule,
    drill: Drill | None,
    work_dir: Path,
    etcd: LocalEtcd | None = None,
) -> LocalResult:
    """Start the pods and watch them until the job ends, starting them all again after a failure for as long as
    `rule` says; every pod is stopped on the way out of each attempt, whatever happens."""
    started = time.monotonic()
    follower = MetricsFollower(Path(plan.trainer.metrics.file or work_dir / "metrics.jsonl"))
    while True:
        pods = rule.pods(plan, work_dir / "logs")
        left = replace(options, timeout_s=options.timeout_s - (time.monotonic() - started))
        try:
            pods.start()
            reason = watch(left, plan, pods, follower, etcd, drill)
        finally:
            pods.stop()  # a TrainJob's JobSet deletes every Job of the attempt, and with them the pods still running
        succeeded = not reason and pods.succeeded
        if reason or succeeded:
            break
        after = rule.after_failure(pods, plan, drill)
        if after.plan is None:
            reason = after.reason
            break
        plan = after.plan
    total_steps = plan.trainer.schedule.steps
    for record in follower.poll():
        options.echo(progress_line(record, total_steps))
    chart = None
    if follower.records:
        chart = write_chart(follower.records, work_dir / "loss_and_throughput.png", f"{plan.job} {rule.chart_title}")
    result = LocalResult(
        succeeded=succeeded,
        reason=reason,
        work_dir=work_dir,
        plan=plan,
        records=follower.records,
        summary=summarize(follower.records, total_steps),
        chart=chart,
        drill=drill.report if drill else None,
        pod_restarts=rule.pod_restarts(pods, plan),
        elapsed_s=time.monotonic() - started,
    )
    if not succeeded:
        for pod in pods.pods:
            tail = pod.log_path.read_text(errors="replace").splitlines()[-15:] if pod.log_path.exists() else []
            options.echo(f"--- last lines of {pod.log_path}\n" + "\n".join(tail))
    options.echo(footer(result))
    return result
