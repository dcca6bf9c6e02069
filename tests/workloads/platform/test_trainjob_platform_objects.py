"""The platform's own objects with job.api trainjob: the PodMonitor scrapes the pod running rank 0 (node 0), the
commands point at it, no etcd is rendered, and the render lists Trainer v2's namespace, the runtime and then the
TrainJob. The metrics and the dashboards that read them are the same whichever API ran the job."""

from __future__ import annotations

import pytest

from stack.job_api import PYTORCHJOB_KIND, RUNTIME_KIND, TRAINJOB_KIND
from tests.workloads.job.trainjob_stacks import STACKS, trainjob_config_of, trainjob_spec_of
from workloads.job.trainjob import training_runtime
from workloads.platform.dashboards import DASHBOARDS, dashboard_queries
from workloads.platform.monitoring import trainer_pod_monitor
from workloads.platform.objects import next_commands, platform_objects
from workloads.render import all_objects

IMAGE = "registry/trainer:tag"


def node_pod_labels(stack: str, index: int) -> dict[str, str]:
    """The labels of node `index`'s pod: the runtime's pod template's, JobSet's and the Job controller's (kubernetes-
    sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go labelAndAnnotateObject; Kubernetes Jobs, Completion
    mode: batch.kubernetes.io/job-completion-index)."""
    spec = trainjob_spec_of(stack)
    (replicated,) = training_runtime(spec)["spec"]["template"]["spec"]["replicatedJobs"]
    labels = dict(replicated["template"]["spec"]["template"]["metadata"]["labels"])
    return labels | {
        "jobset.sigs.k8s.io/jobset-name": spec.name,
        "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
        "jobset.sigs.k8s.io/job-index": "0",
        "batch.kubernetes.io/job-completion-index": str(index),
        "job-name": f"{spec.name}-node-0",
    }


def scraped(config_api: str, pod_labels: dict[str, str]) -> bool:
    return trainer_pod_monitor(api=config_api)["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("stack", STACKS)
def test_only_node_0_the_pod_running_rank_0_is_scraped(stack: str) -> None:
    config = trainjob_config_of(stack)
    pods = [node_pod_labels(stack, index) for index in range(config.gpu_nodes.count)]
    assert [scraped(config.job.api, labels) for labels in pods] == [True] + [False] * (len(pods) - 1)


@pytest.mark.parametrize("stack", STACKS)
def test_the_platform_renders_no_etcd_and_trainer_v2s_namespace(stack: str) -> None:
    objects = platform_objects(trainjob_config_of(stack))
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("Namespace", "kubeflow-system") in names
    assert not any(name == "etcd" for _, name in names)
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitor"]
    assert monitor == trainer_pod_monitor(api="trainjob")


@pytest.mark.parametrize("stack", STACKS)
def test_the_render_lists_the_runtime_before_the_trainjob_and_no_pytorchjob(stack: str) -> None:
    kinds = [o["kind"] for o in all_objects(trainjob_config_of(stack))]
    assert PYTORCHJOB_KIND not in kinds
    assert kinds.index(RUNTIME_KIND) < kinds.index(TRAINJOB_KIND) == len(kinds) - 1


def test_the_leader_log_command_selects_node_0() -> None:
    command = next_commands(trainjob_config_of("p5-2"))["leaderLog"]
    assert "-l fsdp-eks/component=trainer,batch.kubernetes.io/job-completion-index=0 " in command


def test_the_wait_command_names_the_trainjob_the_stack_renders_and_its_complete_condition() -> None:
    config = trainjob_config_of("p5-2")
    (job,) = [o for o in all_objects(config) if o["kind"] == TRAINJOB_KIND]
    command = next_commands(config)["waitForJob"]
    assert f" wait --for=condition=Complete trainjob/{job['metadata']['name']} " in command


def test_no_dashboard_query_selects_on_a_label_only_one_api_sets() -> None:
    """The dashboards read the trainer's and the DCGM exporter's metrics by name and the node label the PodMonitor
    adds (from the pod's node, whichever API made the pod), never the operator's or JobSet's pod labels."""
    api_only = ("training_kubeflow_org", "training.kubeflow.org", "jobset", "job_completion_index", "replica")
    queries = [query for build in DASHBOARDS.values() for query in dashboard_queries(build())]
    assert queries
    assert [q for q in queries if any(label in q for label in api_only)] == []
