"""One local run of a stack's job: render, start etcd, the S3 API and the agents, watch, inject the drill, report.

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
from local.artifacts import LocalStorage, RunArtifacts, S3Upload, local_bucket
from local.config import MAX_LOCAL_NODES, MAX_LOCAL_WORKERS_PER_NODE, LocalJobOptions, Override, local_stack_config
from local.drills import BAD_NODE_NODES, Drill, DrillError, DrillReport, RunStorage, Trigger
from local.etcd import EtcdError, LocalEtcd, free_port, is_healthy
from local.launch import AgentLaunch, LocalPlan, ManifestError, WorkerOptions, local_plan
from local.modelled_fields import UnmodelledFieldError
from local.nodes import LocalNodes, elastic_minimum, nodes_for
from local.pytorchjob_webhook import AdmissionDeniedError, admit_pytorchjob
from local.report import MetricsFollower, Recovery, progress_line, recovery
from stack.config import StackConfig
from stack.fields import ConfigError
from stack.paths import PROJECT_ROOT
from trainer.base.errors import InputError
from trainer.base.metrics_file import Record
from trainer.base.s3.uri import is_s3_uri
from trainer.record.chart import CHART_FILE, write_chart
from trainer.record.summary import Summary, summarize
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

POLL_S = 0.1  # how often pods, metrics and drills are looked at: short, so a drill lands right after its trigger
DEFAULT_TIMEOUT_S = 1800.0
QUIET_NOTE_S = 15.0
DRILL_LOG_EVERY = 1  # a drill's run logs every step: its recovery is timed from the last before it to the first after
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
    s3_uploads: tuple[S3Upload, ...] = ()  # local files put into the run's S3 API before the job starts


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
    artifacts: RunArtifacts | None = None  # what the run left in its S3 API under --artifacts-uri
    recovery: Recovery | None = None  # the drill's cost in time, from the last step before it to the first after

    @property
    def checkpoint_dir(self) -> Path | None:
        directory = self.plan.trainer.checkpoint.directory
        return Path(directory) if directory else None

    @property
    def metrics_file(self) -> Path | None:
        file = self.plan.trainer.metrics.file
        return Path(file) if file else None


def worker_options(options: LocalOptions) -> WorkerOptions:
    """What the run sets in each pod's workers beyond the manifest (--nproc-per-node; every step logged under a
    drill, so that its recovery is timed to the step)."""
    log_every = options.job.log_every or (DRILL_LOG_EVERY if options.drill else None)
    return WorkerOptions(options.job.nproc_per_node, log_every)


def with_drill_defaults(options: LocalOptions) -> LocalOptions:
    """kill-agent needs a survivor: unless told otherwise, run two agents, elastic down to one. lost-storage needs a
    cluster to replace with a smaller one: two agents."""
    job = options.job
    if options.drill == "kill-agent":
        job = replace(job, nodes=job.nodes or 2, min_nodes=job.min_nodes or 1)
    if options.drill == "lost-storage":
        job = replace(job, nodes=job.nodes or 2)
    if options.drill == "bad-node":  # the preflight names a node among three; the job goes on with two
        job = replace(job, nodes=job.nodes or BAD_NODE_NODES, min_nodes=job.min_nodes or BAD_NODE_NODES - 1)
    return replace(options, job=job)


def with_drill_environment(plan: LocalPlan, drill: Drill | None) -> LocalPlan:
    """The plan with what the drill puts into its pod's environment from the start (bad-node's slow preflight)."""
    if drill is None:
        return plan
    agents = [
        AgentLaunch(agent.name, agent.argv, {**agent.env, **drill.agent_env(index)}, agent.trainer)
        for index, agent in enumerate(plan.agents)
    ]
    return replace(plan, agents=agents)


def render_manifest(options: LocalOptions) -> tuple[dict[str, Any], list[Override], StackConfig]:
    """The stack's PyTorchJob for this machine, admitted as the Training Operator's webhook admits it
    (local/pytorchjob_webhook.py), and the config it was rendered from; bad stack names and configs, and a refused
    job, become LocalRunError."""
    config, overrides = local_config(options)
    manifest = pytorchjob_manifest(job_spec(config))
    try:
        admit_pytorchjob(manifest)
    except (AdmissionDeniedError, UnmodelledFieldError) as refused:
        raise LocalRunError(f"{manifest['metadata']['name']}: {refused}") from None
    return manifest, overrides, config


def local_config(options: LocalOptions) -> tuple[StackConfig, list[Override]]:
    """The stack's config for this machine; bad stack names and configs become LocalRunError."""
    nodes = options.job.nodes
    if nodes is not None and not 1 <= nodes <= MAX_LOCAL_NODES:
        raise LocalRunError(f"--nodes {nodes}: expected 1 to {MAX_LOCAL_NODES} agents on one machine")
    workers = options.job.nproc_per_node
    if not 1 <= workers <= MAX_LOCAL_WORKERS_PER_NODE:
        raise LocalRunError(f"--nproc-per-node {workers}: expected 1 to {MAX_LOCAL_WORKERS_PER_NODE} workers per agent")
    try:
        config, overrides = local_stack_config(options.stack, options.job)
    except FileNotFoundError as error:
        raise LocalRunError(str(error)) from None
    except ConfigError as error:
        raise LocalRunError(f"stack {options.stack} with the local changes: {error}") from None
    if not config.job.enabled:
        raise LocalRunError(f"stack {options.stack} has job.enabled false: there is no job to run")
    return config, overrides


def start_storage(options: LocalOptions, config: StackConfig) -> tuple[LocalStorage, list[str]]:
    """The run's S3 API with its artifacts bucket and the --s3-upload files (local/artifacts.py); its failures
    become LocalRunError."""
    try:
        return LocalStorage.start(local_bucket(options.stack, config.artifacts.bucket), options.s3_uploads)
    except (InputError, RuntimeError, OSError) as error:
        raise LocalRunError(f"the local S3 API: {error}") from None


def watch_storage(drill: Drill | None, plan: LocalPlan, storage: LocalStorage) -> None:
    """Give lost-storage what it destroys and waits for: the plan's volumes and the run's checkpoints in S3."""
    uri = plan.trainer.artifacts.uri
    if drill is None or drill.name != "lost-storage":
        return
    if not is_s3_uri(uri):
        raise LocalRunError("--drill lost-storage: the job writes no artifacts to S3 (no --artifacts-uri)")
    assert uri is not None
    drill.storage = RunStorage(plan.volumes, lambda: storage.newest_checkpoint_step(uri))


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


def header(
    options: LocalOptions, plan: LocalPlan, overrides: list[Override], endpoint: str, work_dir: Path, s3: list[str]
) -> str:
    nproc, here = plan.cluster_nproc_per_node, plan.nproc_per_node
    reduced = "" if nproc == here else f" (nprocPerNode is {nproc} on the cluster, one per GPU; {here} here)"
    lines = [
        f"local run of stack {options.stack}: PyTorchJob {plan.job}, {plan.replicas} worker replica(s) -> "
        f"{plan.replicas} torchrun agent(s) with {here} worker process(es) each{reduced}",
        f"  rendezvous: etcd-v2 at {endpoint}, id {plan.rendezvous_id}",
        *(f"  {line}" for line in s3),
        f"  artifacts: {plan.trainer.artifacts.uri or 'none (no --artifacts-uri)'}",
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
        if result.recovery:
            lines.append(f"  {result.recovery.line()}")
        if drill.drill == "lost-storage":
            resumed = f"{drill.resumed_from}, {drill.resumed_tier}" if drill.resumed_from else "nothing (step 0)"
            lines.append(f"  new cluster: {result.plan.replicas} node(s), resumed from {resumed}")
    if result.artifacts:
        lines += [f"  {line}" for line in result.artifacts.lines()]
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
    manifest, overrides, config = render_manifest(options)
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
    storage = None
    try:
        storage, s3_lines = start_storage(options, config)
        endpoint = etcd.endpoint if etcd else str(options.etcd_endpoint)

        def plan_for(manifest: dict[str, Any]) -> LocalPlan:
            assert storage is not None
            try:
                return local_plan(
                    manifest,
                    work_dir,
                    endpoint,
                    free_port(),
                    storage.container_environment(),
                    worker_options(options),
                )
            except ManifestError as error:
                raise LocalRunError(f"the stack's manifest: {error}") from None

        plan = with_drill_environment(plan_for(manifest), drill)
        options.echo(header(options, plan, overrides, endpoint, work_dir, s3_lines))
        rule: RestartRule = PodRestarts(nodes_for(manifest))
        if drill:
            options.echo(f"  drill: {drill.describe(plan.job)}")
            watch_storage(drill, plan, storage)
            if drill.name == "lost-storage":
                smaller = new_cluster_options(options, plan)
                rule = NewCluster(rule, lambda: plan_for(render_manifest(smaller)[0]), options.echo)
        return supervise(options, plan, rule, drill, work_dir, etcd, storage)
    finally:
        if storage:
            storage.stop()
        if etcd:
            etcd.stop()


def new_cluster_nodes(nodes: int) -> int:
    """lost-storage's new cluster: the largest node count below the lost one's that divides it, so that the lost
    job's global batch divides evenly at the new world size (more gradient accumulation per rank)."""
    return max(n for n in range(1, nodes) if nodes % n == 0)


def new_cluster_options(options: LocalOptions, plan: LocalPlan) -> LocalOptions:
    """The same stack's job on the new, smaller cluster, with the lost job's global batch."""
    nodes = new_cluster_nodes(plan.replicas)
    batch = plan.trainer.schedule.global_batch_size
    return replace(options, job=replace(options.job, nodes=nodes, min_nodes=nodes, global_batch_size=batch))


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


class NewCluster:
    """lost-storage's second half, around the API's own rule: once the drill has lost the cluster with its file
    system, the job is started again on a new cluster (`new_plan`: another node count, nothing on disk), as a new
    stack's job would start, with only S3 left to resume from. Any other failure is the API's rule's to answer."""

    def __init__(self, rule: RestartRule, new_plan: Callable[[], LocalPlan], echo: Callable[[str], None]) -> None:
        self.rule, self.new_plan, self.echo = rule, new_plan, echo
        self.chart_title = rule.chart_title
        self.started_again = False

    def pods(self, plan: LocalPlan, log_dir: Path) -> WorkerPods:
        return self.rule.pods(plan, log_dir)

    def after_failure(self, pods: WorkerPods, plan: LocalPlan, drill: Drill | None) -> AfterFailure:
        lost = drill is not None and drill.name == "lost-storage" and drill.report is not None
        if not lost or self.started_again:
            return self.rule.after_failure(pods, plan, drill)
        self.started_again = True
        new = self.new_plan()
        self.echo(
            f"[drill] a new cluster: {new.replicas} node(s) instead of {plan.replicas}, an empty file system; the job "
            f"starts again with {new.trainer.artifacts.uri} in S3"
        )
        return AfterFailure(new)

    def pod_restarts(self, pods: WorkerPods, plan: LocalPlan) -> int:
        return self.rule.pod_restarts(pods, plan)


class PodRestarts:
    """The Training Operator's rule for a PyTorchJob (restartPolicy ExitCode): each pod is restarted or created again
    on its own within the one attempt (local/agents.py WorkerPods); a failure that stops the attempt ends the job."""

    chart_title = "(local)"

    def __init__(self, nodes: LocalNodes | None = None) -> None:
        """`nodes`: where pods created again may go (their taints outlive an attempt, as nodes do); None: anywhere."""
        self.nodes = nodes

    def pods(self, plan: LocalPlan, log_dir: Path) -> WorkerPods:
        nodes = None if self.nodes is None else replace(self.nodes, min_pods=elastic_minimum(plan.agents[0].env))
        return WorkerPods(plan.agents, log_dir, plan.backoff_limit, plan.restart_policy, nodes)

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
    storage: LocalStorage | None = None,
) -> LocalResult:
    """Start the pods and watch them until the job ends, starting them all again after a failure for as long as
    `rule` says; every pod is stopped on the way out of each attempt, whatever happens. The summary lists what the
    run left in `storage`, its S3 API."""
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
    if drill:
        drill.finish(pods)
    uri = plan.trainer.artifacts.uri
    chart = None
    if follower.records:
        chart = write_chart(follower.records, work_dir / CHART_FILE, f"{plan.job} {rule.chart_title}")
    result = LocalResult(
        succeeded=succeeded,
        reason=reason,
        work_dir=work_dir,
        plan=plan,
        records=follower.records,
        summary=summarize(follower.records, total_steps, plan.trainer.checkpoint.export_hf),
        chart=chart,
        drill=drill.report if drill else None,
        pod_restarts=rule.pod_restarts(pods, plan),
        elapsed_s=time.monotonic() - started,
        artifacts=storage.artifacts(uri) if storage and is_s3_uri(uri) and uri else None,
        recovery=recovery(follower.records, drill.report.fired_at) if drill and drill.report else None,
    )
    if not succeeded:
        for pod in pods.pods:
            tail = pod.log_path.read_text(errors="replace").splitlines()[-15:] if pod.log_path.exists() else []
            options.echo(f"--- last lines of {pod.log_path}\n" + "\n".join(tail))
    options.echo(footer(result))
    return result
