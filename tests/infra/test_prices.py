"""The GPU nodes' price at preview (infra/prices.py): AWS's Price List API through a provider in the API's region,
whatever the stack's; the figure dated in the outputs and on the node group the cost policy reads; the catalog's
figure, labelled, when the call is refused; the team's own price over both."""

from __future__ import annotations

import pytest

from sizing.catalog import CATALOG, CATALOG_PRICES_SET
from stack.fields import NAMESPACE
from stack.files import load_stack_config, raw_stack_config
from stack.price_list import PRICE_LIST_REGION, PRICE_TAG_KEY, SOURCE_CATALOG, SOURCE_CONFIG, SOURCE_PRICE_LIST
from tests.harness.fake_price_list import GET_PRODUCT, PUBLICATION_DATE, fake_price
from tests.harness.pulumi_program import run_program
from tests.infra.price_runs import ACCESS_DENIED, refused_price_list_run

pytestmark = pytest.mark.program  # runs __main__.py under the mocks

STACK = "p5-2"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def _gpu_group_tags(run) -> dict[str, str]:
    (group,) = [g for g in run.of_type(NODE_GROUP) if g.name == "gpu-nodes"]
    return group.inputs["tags"]


def test_the_price_comes_from_the_price_list_through_a_provider_in_its_region_for_any_stack_region() -> None:
    raw = raw_stack_config(STACK)
    elsewhere = {
        "aws:region": "us-west-2",
        f"{NAMESPACE}:gpuNodes": {**raw[f"{NAMESPACE}:gpuNodes"], "availabilityZone": "us-west-2a"},
    }
    run = run_program(STACK, elsewhere)
    assert run.error is None, run.error
    (provider,) = [p for p in run.of_type("pulumi:providers:aws") if p.name == "price-list"]
    assert provider.inputs["region"] == PRICE_LIST_REGION
    assert GET_PRODUCT in run.invokes
    price = run.outputs["gpuNodePrice"]
    assert price == {
        "usdPerHour": fake_price("p5.48xlarge"),
        "source": SOURCE_PRICE_LIST,
        "asOf": PUBLICATION_DATE[:10],
        "note": "on-demand Linux in us-west-2",
    }


def test_the_outputs_and_the_node_group_carry_the_price_list_figure() -> None:
    run = run_program(STACK)
    assert run.error is None, run.error
    nodes = load_stack_config(STACK).gpu_nodes.count
    price = fake_price("p5.48xlarge")
    assert run.outputs["estimatedCostPerHour"] == round(nodes * price, 2)
    assert _gpu_group_tags(run)[PRICE_TAG_KEY] == f"{price:g}"
    cost = run.outputs["estimatedRunCost"]
    assert cost["usdPerHour"] == round(nodes * price, 2) and cost["price"]["asOf"] == PUBLICATION_DATE[:10]
    assert set(cost["phases"]) == {"bringUp", "staging", "training", "evaluations", "idleUntilReleased"}
    assert cost["complete"]  # every phase estimated: the model is sized, and the group releases idle nodes
    assert cost["totalUsd"] == pytest.approx(sum(phase["usd"] for phase in cost["phases"].values()), abs=0.05)


def test_a_refused_call_falls_back_to_the_catalogs_figure_labelled_and_dated() -> None:
    run = refused_price_list_run(STACK)
    assert run.error is None, run.error
    price = run.outputs["gpuNodePrice"]
    assert price["source"] == SOURCE_CATALOG and price["asOf"] == CATALOG_PRICES_SET
    assert price["usdPerHour"] == CATALOG["p5.48xlarge"].price_per_hour_usd and "AccessDeniedException" in price["note"]
    assert any(ACCESS_DENIED.split(",")[0] in w and "catalog" in w for w in run.warnings())


def test_the_teams_own_price_wins_and_no_price_list_is_asked() -> None:
    raw = raw_stack_config(STACK)
    run = run_program(STACK, {f"{NAMESPACE}:gpuNodes": {**raw[f"{NAMESPACE}:gpuNodes"], "pricePerHour": 40.0}})
    assert run.error is None, run.error
    assert run.outputs["gpuNodePrice"]["source"] == SOURCE_CONFIG and GET_PRODUCT not in run.invokes
    assert _gpu_group_tags(run)[PRICE_TAG_KEY] == "40"
