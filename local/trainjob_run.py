"""One local run of a stack's job as a Kubeflow Trainer v2 TrainJob (`python -m local --api trainjob`).

The TrainJob and its runtime are rendered by the stack's own builders (workloads/job/trainjob.py) from the stack's
config with the local changes (local/config.py). One torchrun agent per node runs the TrainJob's command with Trainer
v2's PET_* variables (local/trainjob_launch.py): torchrun's static rendezvous on node 0, here 127.0.0.1. No etcd.

The agents are supervised as the JobSet would: a pod that exits with an error fails its Job (restartPolicy Never,
backoffLimit 0), and the JobSet then stops every pod and starts them all again, a fresh static rendezvous, while
restarts are left (local/jobset_policy.py reads the rules from the runtime). The trainer resumes from its last
checkpoint. Every process started here is stopped on success, failure and Ctrl-C.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import yaml

from local.agents import Pod, PodEvent, PodPhase, WorkerPods
from local.drills import Drill, DrillError
from local.etcd import free_port
from local.jobset_policy import GangPolicy, gang_outcome, gang_policy
from local.launch import LocalPlan, ManifestError
from local.procs import kill_tree
from local.report import MetricsFollower, progress_line, summarize, write_chart
from local.restart_policy import Action, container_exit_code
from local.run import LocalOptions, LocalResult, LocalRunError, footer, local_config, shorter_paths, watch
from local.trainjob_launch import trainjob_plan, with_master_port
from stack.paths import PROJECT_ROOT
from workloads.job.spec import job_spec
from workloads.job.trainjob import training_runtime, trainjob_manifest

# Drills that make sense without etcd: a lost node, and a node whose workers keep dying.
GANG_DRILLS = ("kill-agent", "kill-workers")


class GangPods(WorkerPods):
    """The TrainJob's pods of one JobSet attempt: an exit other than 0 fails the pod's Job at once, and with it this
    attempt; what follows is the JobSet's to decide (supervise_gang)."""

    def _after_exit(self, pod: Pod, code: int) -> PodEvent:
        assert pod.process is not None
        kill_tree(pod.process.pid, list(pod.seen))  # what is left of the container goes with it
        launcher = pod.launcher_line()
        said = f" [{launcher}]" if launcher else ""
        if code == 0:
            pod.phase = PodPhase.SUCCEEDED
            return PodEvent(pod.name, "agent exited 0")
        pod.phase = PodPhase.FAILED
        self.failure = f"{pod.name}'s agent exited {code}{said}"
        return PodEvent(pod.name, f"agent exited {code}: its Job failed (restartPolicy Never, backoffLimit 0){said}")


def failed_exit(pods: WorkerPods, policy: GangPolicy) -> tuple[str, int]:
    """The failed pod and exit code the JobSet acts on: one its rules make final if there is one (JobSet applies the
    first rule that any failed Job matches), else the first failed, a pod lost with its node (SIGKILL: 137) first."""
    failed = [
        (pod.name, container_exit_code(pod.process.returncode))
        for phase in (PodPhase.LOST, PodPhase.FAILED)
        for pod in pods.pods
        if pod.phase is phase and pod.process is not None and pod.process.returncode is not None
    ]
    final = [(name, code) for name, code in failed if code in policy.fail_codes]
    return (final or failed or [("a pod", 1)])[0]


def gang_drill(options: LocalOptions, nodes: int) -> Drill | None:
    if not options.drill:
        return None
    if options.drill not in GANG_DRILLS:
        raise LocalRunError(f"--drill {options.drill}: a TrainJob has no etcd; its drills are {', '.join(GANG_DRILLS)}")
    if options.drill == "kill-agent" and nodes < 2:
        raise LocalRunError("--drill kill-agent needs a second node to survive the kill; run with --nodes 2")
    try:
        # Drill's node range is the elastic range a PyTorchJob may go on in; a TrainJob goes on at full size after
        # its gang restart, so every count from 1 to `nodes` is one the job survives to.
        return Drill(options.drill, options.trigger, range(1, nodes + 1), local_etcd=False, pod_index=options.drill_pod)
    except DrillError as error:
        raise LocalRunError(str(error)) from None


def run_trainjob_local(options: LocalOptions) -> LocalResult:
    """Run the TrainJob to the end; raises LocalRunError for bad input before anything is started."""
    if options.etcd_port or options.etcd_endpoint:
        raise LocalRunError("--etcd-port and --etcd-endpoint are the PyTorchJob's: a TrainJob runs no etcd")
    if options.drill == "kill-agent" and options.job.nodes is None:
        options = replace(options, job=replace(options.job, nodes=2))
    config, overrides = local_config(options)
    spec = job_spec(config)
    runtime, trainjob = training_runtime(spec), trainjob_manifest(spec)
    drill = gang_drill(options, spec.nodes)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_dir = (options.work_dir or PROJECT_ROOT / "runs" / "local" / f"{spec.name}-{stamp}").resolve()
    (work_dir / "logs").mkdir(parents=True, exist_ok=True)
    (work_dir / "trainjob.yaml").write_text(yaml.safe_dump_all([runtime, trainjob], sort_keys=False))
    try:
        plan = trainjob_plan(runtime, trainjob, work_dir, metrics_port=free_port(), master_port=free_port())
    except ManifestError as error:
        raise LocalRunError(f"the stack's TrainJob: {error}") from None
    policy = gang_policy(runtime)
    options.echo(header(options, plan, policy, [o.describe() for o in overrides], work_dir))
    if drill:
        options.echo(f"  drill: {drill.describe(plan.job).replace('-worker-', '-node-0-')}")
    return supervise_gang(options, plan, policy, drill, work_dir)


def header(options: LocalOptions, plan: LocalPlan, policy: GangPolicy, overrides: list[str], work_dir: Path) -> str:
    lines = [
        f"local run of stack {options.stack}: TrainJob {plan.job}, {plan.replicas} node(s) -> {plan.replicas} "
        f"torchrun agent(s) with 1 worker process each (numProcPerNode is {plan.cluster_nproc_per_node} on the "
        "cluster, one per GPU)",
        f"  rendezvous: {plan.rendezvous_id}, node 0 (Trainer v2's PET_MASTER_ADDR)",
        f"  restarts: the whole gang, up to the JobSet's maxRestarts {policy.max_restarts}; final on exit codes "
        f"{sorted(policy.fail_codes) or 'none'}",
        f"  rank 0's Prometheus metrics: http://{plan.trainer.metrics.host}:{plan.trainer.metrics.port}/metrics",
        f"  files: {work_dir}",
        "  changed for this machine:",
        *(f"    {line}" for line in [*overrides, *plan.changes]),
    ]
    return shorter_paths("\n".join(lines), work_dir)


def supervise_gang(
    options: LocalOptions, plan: LocalPlan, policy: GangPolicy, drill: Drill | None, work_dir: Path
) -> LocalResult:
    """Start the gang, and start it again whole after a failure while the JobSet's restarts last."""
    started = time.monotonic()
    follower = MetricsFollower(Path(plan.trainer.metrics.file or work_dir / "metrics.jsonl"))
    restarts, reason, succeeded = 0, "", False
    while True:
        pods = GangPods(plan.agents, work_dir / "logs", plan.backoff_limit, plan.restart_policy)
        for pod in pods.pods:
            pod.restarts = restarts  # the JobSet's restart attempt, in the start line of each pod's log
        left = replace(options, timeout_s=options.timeout_s - (time.monotonic() - started))
        try:
            pods.start()
            reason = watch(left, plan, pods, follower, None, drill)
        finally:
            pods.stop()  # the JobSet deletes every Job of the attempt, and with them the pods still running
        succeeded = not reason and pods.succeeded
        if reason or succeeded:
            break
        pod, code = failed_exit(pods, policy)
        outcome = gang_outcome(policy, code, restarts)
        options.echo(f"[jobset] {pod} {outcome.why}")
        if outcome.action is not Action.RECREATE:
            reason = f"{pod} {outcome.why}"
            break
        restarts += 1
        plan = with_master_port(plan, free_port())
    for record in follower.poll():
        options.echo(progress_line(record, plan.trainer.schedule.steps))
    chart = None
    if follower.records:
        chart = write_chart(follower.records, work_dir / "loss_and_throughput.png", f"{plan.job} (local TrainJob)")
    result = LocalResult(
        succeeded=succeeded,
        reason=reason,
        work_dir=work_dir,
        plan=plan,
        records=follower.records,
        summary=summarize(follower.records, plan.trainer.schedule.steps),
        chart=chart,
        drill=drill.report if drill else None,
        pod_restarts=restarts * plan.replicas,  # each JobSet restart creates every pod again
        elapsed_s=time.monotonic() - started,
    )
    if not succeeded:
        for agent in plan.agents:
            log = work_dir / "logs" / f"{agent.name}.log"
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
            options.echo(f"--- last lines of {log}\n" + "\n".join(tail))
    options.echo(footer(result))
    return result
