"""One local run of a stack's job, whatever its job API. It renders and admits the objects, starts etcd where the API
needs it, the S3 API and the agents, then watches, injects the drill and reports.

Used by the CLI (local/cli.py) and the end-to-end tests. The job's API (local/apis.py) gives what differs: the
objects and their admission, the agents, the header and the restart rule of its controller. `run_local` raises
LocalRunError for bad input before anything is started, and stops every process it started on every way out
(success, failure, Ctrl-C).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import yaml

from local.api import AdmittedJob, LocalJobApi
from local.apis import local_api_for
from local.artifacts import LocalStorage, local_bucket
from local.config import MAX_LOCAL_NODES, MAX_LOCAL_WORKERS_PER_NODE, Override, local_stack_config
from local.drills.base import Drill, DrillError
from local.drills.registry import DRILLS, drill_named
from local.etcd import EtcdError, LocalEtcd, is_healthy
from local.launch import LocalPlan
from local.options import LocalOptions, LocalRunError, worker_options
from local.supervise import LocalResult, shorter_paths, supervise
from stack.config import StackConfig
from stack.fields import ConfigError
from stack.files import load_stack_config
from stack.job_api import DEFAULT_JOB_API
from stack.paths import PROJECT_ROOT
from trainer.base.errors import InputError
from workloads.job.api import job_api_for


def job_api(options: LocalOptions) -> str:
    """--api, or the stack's job.api (the default's for an unknown stack or a bad config: the run reports those)."""
    if options.job.api is not None:
        return options.job.api
    try:
        return load_stack_config(options.stack).job.api
    except (FileNotFoundError, ConfigError):
        return DEFAULT_JOB_API


def with_drill_defaults(options: LocalOptions, api: LocalJobApi) -> LocalOptions:
    """The options with what the drill needs where the user left it unset (kill-agent a survivor, lost-storage a
    cluster to replace with a smaller one, bad-node three nodes), for a drill the API's run can take."""
    drill = DRILLS.get(options.drill or "")
    if drill is None or drill not in api.drills:
        return options
    return replace(options, job=drill.job_defaults(options.job, api.elastic))


def with_drill_environment(plan: LocalPlan, drill: Drill | None) -> LocalPlan:
    """The plan with what the drill puts into its pod's environment from the start (bad-node's slow preflight)."""
    if drill is None:
        return plan
    agents = [replace(agent, env={**agent.env, **drill.agent_env(index)}) for index, agent in enumerate(plan.agents)]
    return replace(plan, agents=agents)


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


def drill_for(options: LocalOptions, api: LocalJobApi, nodes: range, local_etcd: bool) -> Drill | None:
    """The drill asked for, checked against the API's run and the job's node counts `nodes` before anything starts."""
    if not options.drill:
        return None
    api.refuse_drill(options.drill)
    try:
        drill = drill_named(options.drill)
        return drill(options.trigger, nodes, local_etcd, options.drill_pod, elastic=api.elastic)
    except DrillError as error:
        raise LocalRunError(str(error)) from None


def start_storage(options: LocalOptions, config: StackConfig) -> tuple[LocalStorage, list[str]]:
    """The run's S3 API with its artifacts bucket and the --s3-upload files (local/artifacts.py); its failures
    become LocalRunError."""
    try:
        return LocalStorage.start(local_bucket(options.stack, config.artifacts.bucket), options.s3_uploads)
    except (InputError, RuntimeError, OSError) as error:
        raise LocalRunError(f"the local S3 API: {error}") from None


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


def header(
    stack: str,
    api: LocalJobApi,
    job: AdmittedJob,
    plan: LocalPlan,
    overrides: list[Override],
    etcd_endpoint: str | None,
    work_dir: Path,
    s3: list[str],
) -> str:
    """The run's first lines: what runs where (the API's), the S3 API's lines `s3`, the rules after a failure (the
    API's), and what the run changed for this machine."""
    lines = [
        *api.describe(stack, job, plan, etcd_endpoint),
        *(f"  {line}" for line in s3),
        f"  artifacts: {plan.trainer.artifacts.uri or 'none (no --artifacts-uri)'}",
        *api.rule_lines(job),
        f"  rank 0's Prometheus metrics: http://{plan.trainer.metrics.host}:{plan.trainer.metrics.port}/metrics",
        f"  files: {work_dir}",
        "  changed for this machine:",
        *(f"    {override.describe()}" for override in overrides),
        *(f"    {change}" for change in plan.changes),
    ]
    return shorter_paths("\n".join(lines), work_dir)


def new_cluster_nodes(nodes: int) -> int:
    """lost-storage's new cluster: the largest node count below the lost one's that divides it, so that the lost
    job's global batch divides evenly at the new world size (more gradient accumulation per rank)."""
    return max(n for n in range(1, nodes) if nodes % n == 0)


def new_cluster_options(options: LocalOptions, plan: LocalPlan) -> LocalOptions:
    """The same stack's job on the new, smaller cluster, with the lost job's global batch."""
    nodes = new_cluster_nodes(plan.replicas)
    batch = plan.trainer.schedule.global_batch_size
    return replace(options, job=replace(options.job, nodes=nodes, min_nodes=nodes, global_batch_size=batch))


def run_local(options: LocalOptions) -> LocalResult:
    """Run the job to the end as its job API's controller would; raises LocalRunError for bad input before anything
    is started."""
    api = local_api_for(job_api(options))
    # Where the platform runs etcd for the API's rendezvous (workloads/job/api.py), a local etcd plays it.
    with_etcd = job_api_for(api.name).platform.etcd
    api.refuse_options(options)
    options = with_drill_defaults(options, api)
    config, overrides = local_config(options)
    job = api.admitted(config)
    drill = drill_for(options, api, job.nodes, local_etcd=with_etcd and not options.etcd_endpoint)
    if with_etcd:
        check_etcd(options)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    default_dir = PROJECT_ROOT / "runs" / "local" / f"{job.name}-{stamp}"
    work_dir = (options.work_dir or default_dir).resolve()  # the agents run in the project root, not here
    (work_dir / "logs").mkdir(parents=True, exist_ok=True)
    (work_dir / api.manifest_file).write_text(yaml.safe_dump_all(job.objects, sort_keys=False))
    etcd = start_etcd(options, work_dir / "logs" / "etcd.log") if with_etcd else None
    storage = None
    try:
        storage, s3_lines = start_storage(options, config)
        endpoint = (etcd.endpoint if etcd else str(options.etcd_endpoint)) if with_etcd else None
        stand_ins = storage.container_environment()

        def plan_for(options: LocalOptions) -> LocalPlan:
            job = api.admitted(local_config(options)[0])
            return api.plan(job, work_dir, endpoint, stand_ins, worker_options(options))

        plan = with_drill_environment(api.plan(job, work_dir, endpoint, stand_ins, worker_options(options)), drill)
        options.echo(header(options.stack, api, job, plan, overrides, endpoint, work_dir, s3_lines))
        rule = api.restart_rule(job, options.echo)
        if drill:
            options.echo(f"  drill: {drill.describe([agent.name for agent in plan.agents])}")
            try:
                drill.attach_storage(plan, storage)
            except DrillError as error:
                raise LocalRunError(str(error)) from None
            first = plan
            rule = drill.restart_rule(rule, lambda: plan_for(new_cluster_options(options, first)), options.echo)
        return supervise(options, plan, rule, drill, work_dir, etcd, storage)
    finally:
        if storage:
            storage.stop()
        if etcd:
            etcd.stop()
