"""The local run's supervisor: it starts, watches and stops the pods attempt by attempt, as the job's controller would.
It follows the API's restart rule (local/restart_rule.py), injects the drill, shows progress, and gives the run's result
and summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from local.agents import JobPods
from local.artifacts import LocalStorage, RunArtifacts
from local.drills.base import Drill, DrillReport
from local.etcd import LocalEtcd
from local.launch import LocalPlan
from local.options import LocalOptions
from local.report import MetricsFollower, Recovery, progress_line, recovery
from local.restart_rule import RestartRule
from trainer.base.metrics.file import Record
from trainer.base.s3.uri import is_s3_uri
from trainer.record.chart import CHART_FILE, write_chart
from trainer.record.summary import Summary, summarize

POLL_S = 0.1  # how often pods, metrics and drills are looked at: short, so a drill lands right after its trigger
QUIET_NOTE_S = 15.0
# What a quiet spell usually is: after a lost node, torch's dynamic rendezvous first lets the node's keep-alives
# expire (3 x 5 s), then waits last_call_timeout (30 s) for more nodes before it settles on fewer.
WAITING_HINT = "the agents are starting or re-forming the rendezvous (see the logs for details)"


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


def shorter_paths(text: str, work_dir: Path) -> str:
    """The run's absolute directory shown relative to the current one, where it lies below it."""
    try:
        relative = work_dir.resolve().relative_to(Path.cwd())
    except ValueError:
        return text
    return text.replace(str(work_dir.resolve()), str(relative))


def footer(result: LocalResult, drill: Drill | None = None) -> str:
    """The run's summary; `drill`: the drill that made `result.drill`, for its own lines."""
    state = "succeeded" if result.succeeded else f"FAILED: {result.reason}"
    lines = [f"== {result.plan.job} {state} in {result.elapsed_s:.0f} s"]
    if result.summary:
        lines += [f"  {line}" for line in result.summary.lines()]
    lines.append(f"  pod restarts (restartPolicy {result.plan.restart_policy}): {result.pod_restarts}")
    if result.drill:
        report = result.drill
        repeats = f", {report.repeats} times" if report.repeats > 1 else ""
        lines.append(
            f"  drill: {report.drill} at step {report.at_step}{repeats}, newest checkpoint then: "
            f"{report.checkpoint_step}"
        )
        if result.recovery:
            lines.append(f"  {result.recovery.line()}")
        if drill:
            lines += [f"  {line}" for line in drill.summary_lines(result.plan)]
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


def watch(
    options: LocalOptions, plan: LocalPlan, pods: JobPods, follower: MetricsFollower, etcd: LocalEtcd | None,
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
        after = rule.after_failure(pods, plan, drill.take_disrupted() if drill else set())
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
    options.echo(footer(result, drill))
    return result
