"""The GPU nodes' price per hour: AWS's Price List API at preview, the catalog's figure as the labelled fallback, or
the team's own price (gpuNodes.pricePerHour).

The Price List Query API's GetProducts answers with `PriceList`, a list of JSON documents as strings, one per product
(botocore pricing/2017-10-15 service-2.json: PriceList is a list of SynthesizedJsonPriceListJsonItem, a string; AWS
Billing user guide, "Reading the service price list file for an AWS service"). pulumi-aws's aws.pricing.getProduct
(terraform-provider-aws internal/service/pricing/product_data_source.go) sends every filter as TERM_MATCH, refuses an
answer of no product or of more than one, and returns the one document unparsed as `result`. A document holds the
product's `attributes`, its `terms` by kind (`OnDemand`, `Reserved`), each term's `priceDimensions` with
`pricePerUnit` in USD and `unit` `Hrs`, the term's `effectiveDate`, and the document's `publicationDate`.

The API answers only in a few regions (botocore data/endpoints.json, `api.pricing` in the aws partition: us-east-1,
eu-central-1, ap-south-1), and the provider calls it in its own region with no per-call override (the data source's
region is disabled, service_package_gen.go): the program asks through a provider of its own in PRICE_LIST_REGION.
The figure travels to the policy pack on the GPU node group's PRICE_TAG_KEY tag (policy/cost.py).

Which figure a stack uses is one rule, node_quote, for the preview (infra/prices.py) and the reviewer's summary
(tools/pr_summary.py, which runs without AWS): the team's own price, else the Price List API's, else the catalog's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sizing.catalog import CATALOG_PRICES_SET, InstanceType
from stack.config import GpuNodesConfig

SERVICE_CODE = "AmazonEC2"
PRICE_LIST_REGION = "us-east-1"
# Linux, shared tenancy, no pre-installed software, a running instance's own price (not an unused reservation's),
# launched the plain way: the one product of an instance type and region that an on-demand node bills (AWS Billing
# user guide, "Product details (products) definitions"; the attribute names are the service's, as
# pricing:DescribeServices lists them for AmazonEC2).
ON_DEMAND_ATTRIBUTES = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
    "operation": "RunInstances",
}
SOURCE_PRICE_LIST = "AWS Price List API"
SOURCE_CATALOG = "catalog fallback"
SOURCE_CONFIG = "gpuNodes.pricePerHour"
CATALOG_CAVEAT = (
    f"the catalog's us-east-1 list price, set on {CATALOG_PRICES_SET} from AWS's figures before its June 2025 P4 and "
    "P5 price cut, so high for those"
)
# The GPU node group's tag with the price a preview used: what the cost policy budgets with (policy/cost.py).
PRICE_TAG_KEY = "fsdp-eks:usd-per-node-hour"


class PriceUnavailableError(Exception):
    """The Price List API's price cannot be had where the quote is made; the message says why."""


class PriceListError(PriceUnavailableError, ValueError):
    """The Price List API's answer is not one on-demand hourly USD price of the product asked for."""


@dataclass(frozen=True)
class PriceQuote:
    """A node-hour's price and where it comes from, dated."""

    usd_per_hour: float
    source: str
    as_of: str  # ISO date: the price list's publication, the catalog figure's setting, or none for the team's own
    note: str = ""

    def to_output(self) -> dict[str, Any]:
        return {"usdPerHour": round(self.usd_per_hour, 4), "source": self.source, "asOf": self.as_of, "note": self.note}

    def nodes_per_hour(self, nodes: int) -> float:
        """What `nodes` such nodes cost per hour, to the cent (the estimatedCostPerHour output)."""
        return round(nodes * self.usd_per_hour, 2)


def on_demand_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """getProduct's filters for the one on-demand Linux product of `instance_type` in `region`."""
    wanted = {"instanceType": instance_type, "regionCode": region, **ON_DEMAND_ATTRIBUTES}
    return [{"field": field, "value": value} for field, value in wanted.items()]


def _one(values: Mapping[str, Any], what: str) -> Any:
    if len(values) != 1:
        raise PriceListError(f"expected one {what}, found {len(values)}")
    return next(iter(values.values()))


def parse_on_demand_product(result: str, instance_type: str, region: str) -> PriceQuote:
    """The hourly USD price in getProduct's `result`, dated by the price list's publication. Raises PriceListError
    for a document of another product, without one on-demand hourly price, or of another shape."""
    try:
        document = json.loads(result)
        attributes = document["product"]["attributes"]
        if attributes.get("instanceType") != instance_type or attributes.get("regionCode", region) != region:
            raise PriceListError(
                f"the product is {attributes.get('instanceType')} in {attributes.get('regionCode')}, not "
                f"{instance_type} in {region}"
            )
        term = _one(document["terms"]["OnDemand"], "on-demand term")
        dimension = _one(term["priceDimensions"], "price dimension")
        if dimension["unit"] != "Hrs":
            raise PriceListError(f"the price is per {dimension['unit']!r}, not per hour")
        price = float(dimension["pricePerUnit"]["USD"])
        published = document.get("publicationDate") or term["effectiveDate"]
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, PriceListError):
            raise
        raise PriceListError(f"not a price list product document: {error!r}") from error
    return PriceQuote(price, SOURCE_PRICE_LIST, published[:10], f"on-demand Linux in {region}")


def catalog_quote(instance: InstanceType, why: str) -> PriceQuote:
    """sizing/catalog.py's list price, when the Price List API could not be read: `why` says what failed."""
    return PriceQuote(
        instance.price_per_hour_usd,
        SOURCE_CATALOG,
        CATALOG_PRICES_SET,
        f"{CATALOG_CAVEAT}; the Price List API could not be read: {why}",
    )


def configured_quote(price: float) -> PriceQuote:
    return PriceQuote(price, SOURCE_CONFIG, "", "the team's own price from the stack file")


def node_quote(gpu_nodes: GpuNodesConfig, read_price_list: Callable[[], PriceQuote]) -> PriceQuote:
    """One GPU node-hour's price: the team's own (gpuNodes.pricePerHour); else what `read_price_list` reads from AWS's
    Price List API; else, when it raises PriceUnavailableError, the catalog's figure, labelled as the fallback and
    dated, with why."""
    if gpu_nodes.price_per_hour is not None:
        return configured_quote(gpu_nodes.price_per_hour)
    try:
        return read_price_list()
    except PriceUnavailableError as why:
        return catalog_quote(gpu_nodes.instance, str(why))
