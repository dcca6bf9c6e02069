"""Kubeflow Trainer v2, the controller a TrainJob (job.api trainjob) needs, as a pinned Helm release and its namespace.

One chart, kubeflow/trainer's kubeflow-trainer (stack/versions.py), installs the trainer.kubeflow.org CRDs, the
controller manager with its webhooks, and JobSet (CRD, controller, webhooks) as a subchart; Trainer v2 runs every
TrainJob as a JobSet. Facts from kubeflow/trainer v2.3.0 unless said otherwise:

- The chart is published to an OCI registry only (.github/workflows/publish-helm-charts.yaml pushes to
  oci://ghcr.io/kubeflow/charts); helm.v3.Release takes an oci:// chart reference (pulumi/pulumi-kubernetes#1892).
- Namespace kubeflow-system, the one its installation guide and kustomize overlay use
  (docs/operator-guides/installation.md); the chart itself follows the release's namespace.
- Every built-in runtime stays off (values.yaml runtimes.*: false): their installer is a post-install hook Job whose
  alpine image runs `apk add kubectl`, which needs the internet, and the project ships its own runtime
  (workloads/job/trainjob.py). With none enabled the chart renders no installer and no cleanup hook
  (templates/runtimes/installer-job.yaml, cleanup-job.yaml: gated on trainer.runtimes.enabled).
- jobset.install true: JobSet's CRD and webhook configurations have fixed cluster-wide names, so a cluster that
  already runs JobSet must set it false (values.yaml, jobset.install).
- The release waits for the controller managers to be Ready, and both report Ready only once their webhook
  certificates exist and the webhook servers run (cmd/trainer-controller-manager/main.go; kubernetes-sigs/jobset
  v0.12.0 main.go): a runtime or TrainJob created after it is admitted.
"""

from __future__ import annotations

from typing import Any

from stack.versions import KUBEFLOW_TRAINER_CHART_VERSION
from workloads.platform.charts import ChartRelease
from workloads.platform.monitoring import PART_OF

TRAINER_V2_NAMESPACE = "kubeflow-system"
TRAINER_V2_REPO = "oci://ghcr.io/kubeflow/charts"
TRAINER_V2_CHART = "kubeflow-trainer"
# The release name fixes the controller's names: Deployment and Service kubeflow-trainer-controller-manager
# (templates/_helpers.tpl trainer.fullname).
TRAINER_V2_RELEASE = "kubeflow-trainer"


def trainer_v2_namespace() -> dict[str, Any]:
    """Created before the release and deleted after it, so `pulumi destroy` leaves no namespace behind."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": TRAINER_V2_NAMESPACE, "labels": dict(PART_OF)},
    }


def trainer_v2_values() -> dict[str, Any]:
    return {
        "crds": {"enabled": True},
        "jobset": {"install": True},
        "runtimes": {"defaultEnabled": False},
    }


def trainer_v2_chart() -> ChartRelease:
    return ChartRelease(
        "kubeflow-trainer",
        TRAINER_V2_RELEASE,
        TRAINER_V2_REPO,
        TRAINER_V2_CHART,
        KUBEFLOW_TRAINER_CHART_VERSION,
        TRAINER_V2_NAMESPACE,
        trainer_v2_values(),
    )
