"""The GPU nodes' price per hour at preview: the team's own, else AWS's Price List API, else the catalog's, labelled.

The call goes through a provider of its own in stack/price_list.py's PRICE_LIST_REGION (the API's endpoint), with the
stack's AWS profile if it names one; the CI preview and deploy roles may call pricing:GetProducts (ci/preview_policy.py,
ci/deploy_policy.py). A failed call (no permission, no network, an answer of another shape) is not the stack's
failure: the preview goes on with the catalog's figure, which says it is the fallback, when it was set, and why.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stack.config import GpuNodesConfig
from stack.price_list import (
    PRICE_LIST_REGION,
    SERVICE_CODE,
    SOURCE_CATALOG,
    PriceQuote,
    PriceUnavailableError,
    node_quote,
    on_demand_filters,
    parse_on_demand_product,
)

# Regions outside the aws partition (China, GovCloud, ISO) have price lists of their own that this endpoint does not
# serve.
OTHER_PARTITIONS = ("cn-", "us-gov-", "us-iso")


class PriceList(pulumi.ComponentResource):
    """The GPU nodes' price, `quote`, and the provider in the Price List API's region it was read through (with the
    stack's profile: an explicit provider reads no `aws:` stack config of its own)."""

    quote: PriceQuote

    def __init__(self, name: str, config: GpuNodesConfig, region: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:PriceList", name, None, opts)
        self.quote = self._quote(name, config, region)
        self.register_outputs({"usdPerHour": self.quote.usd_per_hour, "source": self.quote.source})

    def _quote(self, name: str, config: GpuNodesConfig, region: str) -> PriceQuote:
        quote = node_quote(config, lambda: self._read(name, config, region))
        if quote.source == SOURCE_CATALOG:
            pulumi.log.warn(f"GPU node price: {quote.note}", resource=self)
        return quote

    def _read(self, name: str, config: GpuNodesConfig, region: str) -> PriceQuote:
        if region.startswith(OTHER_PARTITIONS):
            raise PriceUnavailableError(f"{region} is priced by another partition's price list")
        provider = aws.Provider(
            name,
            region=PRICE_LIST_REGION,
            profile=pulumi.Config("aws").get("profile"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        filters = on_demand_filters(config.instance_type, region)
        try:
            product = aws.pricing.get_product(
                service_code=SERVICE_CODE,
                filters=[aws.pricing.GetProductFilterArgs(field=f["field"], value=f["value"]) for f in filters],
                opts=pulumi.InvokeOptions(provider=provider, parent=self),
            )
        except Exception as error:  # the engine's answer to a refused or failed call: the catalog's figure instead
            raise PriceUnavailableError(str(error).splitlines()[0] if str(error) else type(error).__name__) from error
        return parse_on_demand_product(product.result, config.instance_type, region)  # PriceListError if off-shape


def node_price(config: GpuNodesConfig, region: str) -> PriceQuote:
    """What one GPU node costs per hour, and from where."""
    return PriceList("price-list", config, region).quote
