"""The preview role's data sources are exactly those the program calls: every one it calls is listed (or the preview
fails for want of a permission), and every one listed is called by some stack (or the role holds a permission
nothing uses, as ecr:GetAuthorizationToken was once the image push stopped fetching an ECR login)."""

from __future__ import annotations

import pytest

from ci.preview_policy import INVOKE_ACTIONS, preview_actions
from tests.harness.pulumi_program import ProgramRun, run_program
from tests.infra.existing_cluster_stack import run_existing_cluster


@pytest.fixture(scope="module", params=["first", "update"])
def preview_runs(request: pytest.FixtureRequest) -> list[ProgramRun]:
    """The stacks that between them call every data source the program has: a stack that builds everything, the
    CloudWatch add-on (its version), and an existing cluster (its endpoint)."""
    runs = [
        run_program("p5-16", preview=request.param),
        run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}}, preview=request.param),
        run_existing_cluster(request.param),
    ]
    assert all(r.error is None for r in runs), [r.error for r in runs]
    return runs


@pytest.mark.program
def test_the_preview_roles_data_sources_are_the_ones_the_program_calls(preview_runs: list[ProgramRun]) -> None:
    assert {token for run in preview_runs for token in run.invokes} == set(INVOKE_ACTIONS)


def test_an_existing_clusters_endpoint_is_read_with_describe_cluster_alone() -> None:
    assert INVOKE_ACTIONS["aws:eks/getCluster:getCluster"] == ("eks:DescribeCluster",)
    assert "eks:DescribeCluster" in preview_actions()


def test_the_preview_role_cannot_fetch_an_ecr_login() -> None:
    assert "ecr:GetAuthorizationToken" not in preview_actions()
