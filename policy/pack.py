"""The policies as pulumi_policy objects: the only module of the pack that knows the policy SDK.

Each policy wraps a pure check from its own module. Properties arrive from the engine wrapped in proxies that raise
when a value is unknown during preview; `plain` turns them into dicts and lists with UNKNOWN in those places, so one
unknown field (the trainer image's digest) does not stop a check from reading the rest of a resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from policy import cost, exposure, hf_token, memory, node_groups, role_trust, s3_buckets, s3_grants
from policy.jobs.registry import JOB_READERS
from policy.props import UNKNOWN, StackResource

ResourceCheck = Callable[[str, Mapping[str, Any]], list[str]]
ConfiguredResourceCheck = Callable[[str, Mapping[str, Any], Mapping[str, Any]], list[str]]
StackCheck = Callable[[Sequence[StackResource], Mapping[str, Any]], list[tuple[str | None, str]]]


def plain(value: Any) -> Any:
    """A deep plain copy of engine properties, UNKNOWN where the proxy says a value is not known yet."""
    if isinstance(value, Mapping):
        result = {}
        for key in value:
            try:
                result[key] = plain(value[key])
            except UnknownValueError:
                result[key] = UNKNOWN
        return result
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = []
        for index in range(len(value)):
            try:
                items.append(plain(value[index]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def stack_resource(resource: PolicyResource) -> StackResource:
    return StackResource(
        type=resource.resource_type,
        urn=resource.urn,
        props=plain(resource.props),
        parent=resource.parent.urn if resource.parent is not None else None,
        dependencies=tuple(d.urn for d in resource.dependencies),
        property_dependencies={k: tuple(d.urn for d in v) for k, v in resource.property_dependencies.items()},
    )


def resource_policy(
    name: str,
    description: str,
    check: ConfiguredResourceCheck,
    config_schema: dict[str, Any] | None = None,
) -> ResourceValidationPolicy:
    """A mandatory per-resource policy: `check` reads a resource's type, its inputs and the pack's config for the
    policy (with `config_schema`'s defaults)."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        config = _with_defaults(args.get_config(), config_schema or {})
        for message in check(args.resource_type, plain(args.props), config):
            report_violation(message, None)

    schema = PolicyConfigSchema(properties=config_schema) if config_schema else None
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=schema,
    )


def stack_policy(
    name: str,
    description: str,
    check: StackCheck,
    level: EnforcementLevel = EnforcementLevel.MANDATORY,
    config_schema: dict[str, Any] | None = None,
) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [stack_resource(r) for r in args.resources]
        config = _with_defaults(args.get_config(), config_schema or {})
        for urn, message in check(resources, config):
            report_violation(message, urn)

    schema = PolicyConfigSchema(properties=config_schema) if config_schema else None
    return StackValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=level, config_schema=schema
    )


def _with_defaults(config: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The engine fills in schema defaults; a config given as a partial dict (tests, older CLIs) gets them here."""
    return {**{k: v["default"] for k, v in schema.items() if "default" in v}, **dict(config or {})}


def _ignore_config(check: Callable[[Sequence[StackResource]], list[tuple[str, str]]]) -> StackCheck:
    return lambda resources, _config: list(check(resources))


def _props_only(check: ResourceCheck) -> ConfiguredResourceCheck:
    return lambda resource_type, props, _config: check(resource_type, props)


POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = [
    stack_policy(
        "efa-on-every-network-card",
        "GPU node groups of EFA instance types launch from a template with one EFA interface per network card.",
        _ignore_config(node_groups.efa_stack_violations),
    ),
    stack_policy(
        "gpu-node-group-one-az",
        "GPU node groups of EFA instance types sit in exactly one subnet, so in one availability zone.",
        _ignore_config(node_groups.single_az_stack_violations),
    ),
    resource_policy(
        "launch-template-imdsv2",
        "Every launch template requires IMDSv2 (metadataOptions.httpTokens: required).",
        _props_only(node_groups.imdsv2_violations),
    ),
    resource_policy(
        "launch-template-imds-hop-limit",
        "Every launch template sets metadataOptions.httpPutResponseHopLimit to 1, so no pod reaches the node role.",
        _props_only(node_groups.imds_hop_limit_violations),
    ),
    resource_policy(
        "role-trust-within-account",
        "Every IAM role is assumable only by the stack's AWS services or an EKS OIDC provider of its own account.",
        role_trust.trust_violations,
        config_schema=role_trust.CONFIG_SCHEMA,
    ),
    resource_policy(
        "no-public-monitoring-or-etcd",
        "Grafana, Prometheus and etcd get no internet-facing load balancer or Ingress.",
        _props_only(exposure.public_endpoint_violations),
    ),
    resource_policy(
        "hf-token-only-from-secrets-manager",
        "The Hugging Face token is in no Kubernetes object; a job on a gated model names its Secrets Manager secret.",
        _props_only(hf_token.hf_token_violations),
    ),
    *(
        resource_policy(
            reader.node_type_policy.name, reader.node_type_policy.description, _props_only(reader.node_type_violations)
        )
        for reader in JOB_READERS
    ),
    resource_policy(
        "job-memory-fits-gpu",
        "The training job's estimated memory per GPU (sizing.estimate) fits the GPU of its node type.",
        _props_only(memory.memory_fit_violations),
    ),
    stack_policy(
        "s3-bucket-private-and-encrypted",
        "Every S3 bucket of the stack blocks public access (all four settings), has default server-side encryption, "
        "and no bucket policy or ACL grants to everyone.",
        _ignore_config(s3_buckets.s3_bucket_stack_violations),
    ),
    resource_policy(
        "s3-bucket-policy-within-account",
        "No bucket policy allows a principal outside the stack's account(s): another account, '*' or a service not "
        "pinned to the stack's account, NotPrincipal, a federated or canonical-user principal.",
        s3_grants.cross_account_violations,
        config_schema=s3_grants.CONFIG_SCHEMA,
    ),
    stack_policy(
        "gpu-cost-per-hour-budget",
        "The stack's GPU nodes cost no more per hour than the configured budget.",
        cost.budget_violations,
        level=EnforcementLevel.ADVISORY,
        config_schema=cost.CONFIG_SCHEMA,
    ),
]
