"""AWS's Price List Query API as pulumi-aws's aws.pricing.getProduct answers it: `result`, the one product document
GetProducts returned, as a JSON string (terraform-provider-aws internal/service/pricing/product_data_source.go: every
filter is a TERM_MATCH, no match or more than one fails the data source).

The document's shape is AWS's (botocore pricing/2017-10-15 service-2.json, PriceList: a list of JSON strings; AWS
Billing user guide, "Reading the service price list file for an AWS service"; the fields of EC2 product documents
as GetProducts answers that public projects record: attributes, SKU, offer term and rate codes, `publicationDate`).
The prices are the fake's own, half the catalog's
figure, so a test tells the price list's figure from the catalog's; the answer comes only from the API's own regions
(botocore data/endpoints.json, api.pricing), as AWS's endpoint resolution would have it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import grpc

from sizing.catalog import CATALOG
from tests.harness.fake_ids import digest

GET_PRODUCT = "aws:pricing/getProduct:getProduct"
PRICE_LIST_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
PUBLICATION_DATE = "2026-11-28T21:13:05Z"
EFFECTIVE_DATE = "2026-11-01T00:00:00Z"
ON_DEMAND_OFFER = "JRTCKXETXF"  # AWS's on-demand offer term code
HOURLY_RATE = "6YS6EN2CT7"  # AWS's rate code of an hourly on-demand price dimension
# Every EC2 product document carries these; the fake's products are the running, on-demand Linux ones.
ATTRIBUTES = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
    "operation": "RunInstances",
}


class PriceListRefusalError(grpc.RpcError):
    """A data source's failure as the engine hands it to the program: the resource monitor's Invoke fails with the
    provider's error ("invocation of TOKEN returned an error: ...", pulumi/pulumi pkg/resource/deploy/source_eval.go),
    a gRPC error the SDK turns into the exception the call raises (pulumi sdk/python runtime/invoke.py do_invoke,
    settings.grpc_error_to_exception)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return f"invocation of {GET_PRODUCT} returned an error: {self.error}"


def fake_price(instance_type: str) -> float:
    return round(CATALOG[instance_type].price_per_hour_usd / 2, 4)


def product_document(instance_type: str, region: str) -> str:
    """One EC2 product's document, as GetProducts' PriceList holds it."""
    sku = digest("sku", instance_type, region)[:16].upper()
    term = f"{sku}.{ON_DEMAND_OFFER}"
    document: dict[str, Any] = {
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                **ATTRIBUTES,
                "instanceType": instance_type,
                "regionCode": region,
                "servicecode": "AmazonEC2",
                "servicename": "Amazon Elastic Compute Cloud",
                "locationType": "AWS Region",
                "usagetype": f"BoxUsage:{instance_type}",
                "vcpu": str(CATALOG[instance_type].vcpus),
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                term: {
                    "priceDimensions": {
                        f"{term}.{HOURLY_RATE}": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${fake_price(instance_type):.4f} per On Demand Linux {instance_type} "
                            "Instance Hour",
                            "appliesTo": [],
                            "rateCode": f"{term}.{HOURLY_RATE}",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": f"{fake_price(instance_type):.10f}"},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": EFFECTIVE_DATE,
                    "offerTermCode": ON_DEMAND_OFFER,
                    "termAttributes": {},
                }
            }
        },
        "version": "20261128211305",
        "publicationDate": PUBLICATION_DATE,
    }
    return json.dumps(document, separators=(",", ":"))


def get_product(args: Mapping[str, Any], provider_region: str) -> dict[str, Any]:
    """getProduct's answer, or the refusals AWS and the data source would give."""
    if provider_region not in PRICE_LIST_REGIONS:
        raise PriceListRefusalError(
            f"reading Pricing Products: operation error Pricing: GetProducts, https response error: dial tcp: lookup "
            f"api.pricing.{provider_region}.amazonaws.com: no such host"
        )
    filters = {f["field"]: f["value"] for f in args.get("filters") or []}
    if args.get("serviceCode") != "AmazonEC2" or filters.get("instanceType") not in CATALOG:
        raise PriceListRefusalError("Pricing product query did not return any elements")
    loose = [key for key in (*ATTRIBUTES, "regionCode") if key not in filters]
    if loose:  # each attribute left out matches its other values' products too (Windows, dedicated, reserved ...)
        raise PriceListRefusalError("Pricing product query not precise enough. Returned 2 elements")
    if any(filters[key] != value for key, value in ATTRIBUTES.items()):
        raise PriceListRefusalError("Pricing product query did not return any elements")
    result = product_document(filters["instanceType"], filters["regionCode"])
    return {"serviceCode": "AmazonEC2", "filters": args.get("filters"), "result": result, "id": digest(result)[:8]}
