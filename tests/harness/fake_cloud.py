"""The Pulumi mocks' answer for every resource and data source the program registers or calls, as the real
providers would give it: outputs are the inputs plus what the provider computes (fake_aws.py, fake_eks.py,
and below for Kubernetes, random and docker-build).

Strict by construction: a resource type or data source the fake does not model fails the run, and every
provider-computed output the fake does not model (from the SDK's own list, sdk_classes.computed_outputs) reads
as an UNMODELED marker, so a program that passes such a value on shows it in some registered input.
"""

from __future__ import annotations

import base64
import json
import os
import string
from typing import Any

from pulumi.runtime import mocks

from tests.harness.fake_aws import AWS_MODELS, aws_invoke
from tests.harness.fake_eks import AWS_PACKAGE_VERSION, Child, cluster_outputs, describe_cluster, node_group_outputs
from tests.harness.fake_ids import auto_name, digest, key_uuid
from tests.harness.fake_price_list import GET_PRODUCT, get_product
from tests.harness.sdk_classes import computed_outputs, resource_class

UNMODELED = "<unmodeled output>"
PULUMI_EKS_COMPONENTS = ("eks:index:Cluster", "eks:index:ManagedNodeGroup")
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
RANDOM_ID = "random:index/randomId:RandomId"
DOCKER_IMAGE = "docker-build:index:Image"
GET_CLUSTER = "aws:eks/getCluster:getCluster"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
# What a StackReference reads: the referenced stack's outputs of its last `up`, as JSON; none unless a test says
# (a stack not deployed yet, or deployed before the output it asks for existed).
PREVIOUS_OUTPUTS_VARIABLE = "FSDP_EKS_MOCK_STACK_OUTPUTS"


def unmodeled(type_token: str, output: str) -> str:
    return f"{UNMODELED} {type_token}.{output}"


def refuse_unmodeled(typ: str, custom: bool | None) -> None:
    """Every registration the fake does not answer as its provider would fails the run: a type outside the models,
    unless it is the program's own component (no provider, outputs only those it registers)."""
    if not custom and resource_class(typ) is None:
        return
    if typ in AWS_MODELS or typ in PULUMI_EKS_COMPONENTS or typ in (RANDOM_PASSWORD, RANDOM_ID) or typ == DOCKER_IMAGE:
        return
    if typ.startswith(("pulumi:providers:", "kubernetes:")) or typ == STACK_REFERENCE:
        return
    raise NotImplementedError(f"the fake cloud does not model {typ}; add what its provider returns")


class FakeCloud(mocks.Mocks):
    """Plays AWS, Kubernetes and the other providers for one program run."""

    def __init__(self, region: str = "us-east-1") -> None:
        self.region = region
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}
        self.outputs: dict[tuple[str, str], dict[str, Any]] = {}
        self._eks_clusters: dict[str, tuple[str, str | None]] = {}  # component URN -> EKS cluster name, version
        self._launch_templates: dict[str, dict[str, Any]] = {}  # launch template id -> inputs
        self.current_urn = ""  # set by the recording monitor before each registration
        self.invokes: list[str] = []  # every data source the program called, for the CI preview role

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
        inputs = dict(args.inputs)
        refuse_unmodeled(args.typ, args.custom)
        if not args.custom and resource_class(args.typ) is None and args.typ != STACK_REFERENCE:  # a read: no custom
            return "", {}  # the program's own component: no provider, no outputs but those it registers
        resource_id, computed = self._model(args.typ, args.name, inputs)
        state = {**inputs, **computed}
        for output in computed_outputs(args.typ):
            state.setdefault(output, unmodeled(args.typ, output))
        self.inputs[(args.typ, args.name)] = inputs
        self.outputs[(args.typ, args.name)] = state
        return resource_id, state

    def _model(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if typ in AWS_MODELS:
            resource_id, computed = AWS_MODELS[typ](name, inputs, self.region)
            if typ == "aws:ec2/launchTemplate:LaunchTemplate":
                self._launch_templates[resource_id] = inputs
            return resource_id, computed
        if typ == "eks:index:Cluster":
            computed = cluster_outputs(name, inputs, self.region)
            self._eks_clusters[self.current_urn] = (computed["eksCluster"].id, inputs.get("version"))
            return self.current_urn, computed
        if typ == "eks:index:ManagedNodeGroup":
            known = self._eks_clusters.get(inputs.get("cluster") or "")
            cluster_name = inputs.get("clusterName") or (known[0] if known else None)
            if cluster_name is None:
                raise ValueError(f"{name}: a ManagedNodeGroup with neither a clusterName nor a cluster of this run")
            cluster = (cluster_name, known[1] if known else None)
            template_id = (inputs.get("launchTemplate") or {}).get("id")
            template = self._launch_templates.get(template_id) if template_id else None
            return self.current_urn, node_group_outputs(name, inputs, self.region, cluster, template)
        if typ.startswith("pulumi:providers:"):
            return key_uuid(name, typ), {}
        if typ == STACK_REFERENCE:
            # The engine reads the stack named by the `name` input; its id is that name, its outputs the stack's
            # (pulumi sdk stack_reference.py: `outputs`, `secretOutputNames`).
            previous = json.loads(os.environ.get(PREVIOUS_OUTPUTS_VARIABLE) or "{}")
            return inputs["name"], {"outputs": previous, "secretOutputNames": []}
        if typ.startswith("kubernetes:"):
            return _kubernetes(typ, name, inputs)
        if typ.startswith("random:"):
            return _random(typ, name, inputs)
        if typ == DOCKER_IMAGE:
            image_digest = "sha256:" + digest("image", name, *inputs.get("tags", []))
            return name, {
                "ref": f"{inputs['tags'][0]}@{image_digest}",
                "digest": image_digest,
                "contextHash": digest("context", name),
            }
        raise NotImplementedError(f"the fake cloud does not model {typ}; add what its provider returns")

    def call(self, args: mocks.MockCallArgs) -> tuple[dict, list | None]:
        self.invokes.append(args.token)
        if args.token == GET_CLUSTER:
            return describe_cluster(dict(args.args), self.region), []
        if args.token == GET_PRODUCT:
            return get_product(dict(args.args), self.provider_region(args.provider)), []
        answer = aws_invoke(args.token, dict(args.args), self.region)
        if answer is None:
            raise NotImplementedError(f"the fake cloud does not answer {args.token}")
        return answer, []

    def provider_region(self, reference: str) -> str:
        """The region of the provider an invoke went through ("urn::id", empty for the default provider, which has
        the stack's region)."""
        if not reference:
            return self.region
        urn = reference.split("::")[:-1]  # urn:pulumi:STACK::PROJECT::PARENT-TYPES$TYPE::NAME, then the id
        typ, name = urn[-2].split("$")[-1], urn[-1]
        return (self.inputs.get((typ, name)) or {}).get("region") or self.region


def _kubernetes(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    metadata = inputs.get("metadata") or {}
    object_name = metadata.get("name") or inputs.get("name") or auto_name(name)
    namespace = metadata.get("namespace") or inputs.get("namespace")
    object_id = f"{namespace}/{object_name}" if namespace else object_name
    if typ == "kubernetes:helm.sh/v3:Release":
        status = {
            "name": object_name,
            "namespace": namespace or "default",
            "status": "deployed",
            "revision": 1,
            "chart": inputs.get("chart"),
            "version": inputs.get("version"),
        }
        return object_id, {"name": object_name, "status": status}
    if typ.startswith("kubernetes:kustomize/") or typ.startswith("kubernetes:yaml/"):
        return object_id, {}
    return object_id, {"metadata": {**metadata, "name": object_name, "uid": key_uuid(typ, object_id)}}


def _random(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    seed = digest("random", typ, name)
    if typ == RANDOM_PASSWORD:
        alphabet = string.ascii_letters + string.digits
        length = int(inputs.get("length", 16))
        result = "".join(alphabet[int(seed[2 * i : 2 * i + 2], 16) % len(alphabet)] for i in range(length))
        return "none", {"result": result, "bcryptHash": "$2a$10$" + seed[:53]}
    if typ == RANDOM_ID:
        raw = bytes.fromhex(seed[: 2 * int(inputs.get("byteLength", 8))])
        b64_url = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return b64_url, {
            "hex": raw.hex(),
            "b64Url": b64_url,
            "b64Std": base64.b64encode(raw).decode(),
            "dec": str(int.from_bytes(raw, "big")),
        }
    raise NotImplementedError(f"the fake cloud does not model {typ}")


def child_reference(child: Child, urn: str) -> dict[str, Any]:
    """The wire form of a resource reference (pulumi sdk rpc.py, _special_resource_sig)."""
    from pulumi.runtime import rpc

    return {
        rpc._special_sig_key: rpc._special_resource_sig,
        "urn": urn,
        "id": child.id,
        "packageVersion": AWS_PACKAGE_VERSION,
    }
