"""The GPU node's price from AWS's Price List API (stack/price_list.py), read from getProduct's `result` in the shape
AWS gives it (tests/harness/fake_price_list.py), and the catalog's figure as the labelled, dated fallback."""

from __future__ import annotations

import json

import pytest

from sizing.catalog import CATALOG, CATALOG_PRICES_SET
from stack.parse import parse_stack_config
from stack.price_list import (
    ON_DEMAND_ATTRIBUTES,
    SOURCE_CATALOG,
    SOURCE_PRICE_LIST,
    PriceListError,
    PriceQuote,
    PriceUnavailableError,
    catalog_quote,
    configured_quote,
    node_quote,
    on_demand_filters,
    parse_on_demand_product,
)
from tests.harness.fake_price_list import PUBLICATION_DATE, PriceListRefusalError, fake_price, get_product

P5 = "p5.48xlarge"


def _answer(instance_type: str = P5, region: str = "us-east-1") -> str:
    args = {"serviceCode": "AmazonEC2", "filters": on_demand_filters(instance_type, region)}
    return get_product(args, "us-east-1")["result"]


@pytest.mark.parametrize("instance_type", sorted(CATALOG))
def test_the_filters_name_exactly_one_product_and_its_hourly_price_is_read_dated(instance_type: str) -> None:
    quote = parse_on_demand_product(_answer(instance_type), instance_type, "us-east-1")
    assert quote.usd_per_hour == fake_price(instance_type) != CATALOG[instance_type].price_per_hour_usd
    assert (quote.source, quote.as_of) == (SOURCE_PRICE_LIST, PUBLICATION_DATE[:10])


def test_a_filter_left_out_matches_other_products_and_the_data_source_refuses() -> None:
    for left_out in ON_DEMAND_ATTRIBUTES:
        filters = [f for f in on_demand_filters(P5, "us-east-1") if f["field"] != left_out]
        with pytest.raises(PriceListRefusalError, match="not precise enough"):
            get_product({"serviceCode": "AmazonEC2", "filters": filters}, "us-east-1")


def test_the_price_list_answers_only_in_its_own_regions() -> None:
    with pytest.raises(PriceListRefusalError, match="no such host"):
        get_product({"serviceCode": "AmazonEC2", "filters": on_demand_filters(P5, "us-west-2")}, "us-west-2")


def _edited(edit) -> str:
    document = json.loads(_answer())
    edit(document)
    return json.dumps(document)


def _term(document: dict) -> dict:
    return next(iter(document["terms"]["OnDemand"].values()))


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda d: d["product"]["attributes"].update(instanceType="p4d.24xlarge"), "not p5.48xlarge"),
        (lambda d: d["product"]["attributes"].update(regionCode="eu-west-1"), "not p5.48xlarge in us-east-1"),
        (lambda d: d["terms"]["OnDemand"].update(second=_term(d)), "expected one on-demand term, found 2"),
        (lambda d: d["terms"].pop("OnDemand"), "not a price list product document"),
        (lambda d: next(iter(_term(d)["priceDimensions"].values())).update(unit="Quantity"), "not per hour"),
        (lambda d: next(iter(_term(d)["priceDimensions"].values()))["pricePerUnit"].pop("USD"), "not a price list"),
    ],
    ids=["another type", "another region", "two terms", "no on-demand term", "not hourly", "no USD"],
)
def test_an_answer_of_another_shape_is_refused(edit, says: str) -> None:
    with pytest.raises(PriceListError, match=says):
        parse_on_demand_product(_edited(edit), P5, "us-east-1")


def test_the_fallback_says_it_is_the_catalogs_when_it_was_set_and_why() -> None:
    quote = catalog_quote(CATALOG[P5], "AccessDenied: pricing:GetProducts")
    assert (quote.usd_per_hour, quote.source, quote.as_of) == (98.32, SOURCE_CATALOG, CATALOG_PRICES_SET)
    assert "before its June 2025" in quote.note and quote.note.endswith("AccessDenied: pricing:GetProducts")
    assert configured_quote(55.0).to_output()["source"] == "gpuNodes.pricePerHour"


def _gpu_nodes(**settings: object):
    raw = {"aws:region": "us-east-1", "fsdp-eks:gpuNodes": {"instanceType": P5, "count": 2, **settings}}
    return parse_stack_config(raw, "t").gpu_nodes


def _read() -> PriceQuote:
    return parse_on_demand_product(_answer(), P5, "us-east-1")


def _unreadable(why: str):
    def read() -> PriceQuote:
        raise PriceUnavailableError(why)

    return read


def test_one_rule_the_teams_price_then_the_price_lists_then_the_catalogs_labelled() -> None:
    assert node_quote(_gpu_nodes(pricePerHour=50), _read) == configured_quote(50)
    assert node_quote(_gpu_nodes(), _read).source == SOURCE_PRICE_LIST
    fallback = node_quote(_gpu_nodes(), _unreadable("no AWS here"))
    assert fallback == catalog_quote(CATALOG[P5], "no AWS here") and fallback.source == SOURCE_CATALOG


def test_an_answer_of_another_shape_falls_back_to_the_catalog_too() -> None:
    def off_shape() -> PriceQuote:
        return parse_on_demand_product(_edited(lambda d: d["terms"].pop("OnDemand")), P5, "us-east-1")

    quote = node_quote(_gpu_nodes(), off_shape)
    assert quote.source == SOURCE_CATALOG and "not a price list product document" in quote.note


def test_the_cost_of_the_nodes_is_to_the_cent() -> None:
    assert configured_quote(50).nodes_per_hour(2) == 100.0
    assert catalog_quote(CATALOG[P5], "x").nodes_per_hour(3) == round(3 * 98.32, 2)
