"""What the job's pods may do to nodes: read one, and add the bad-node taint to their own. A launcher that found
its node's fabric bad (EXIT_BAD_NODE) taints the node (trainer/launch/node_taint.py), and no pod of the job is
scheduled there again.

A ClusterRole (nodes are cluster-scoped, so a namespaced Role cannot name them) with get and patch on nodes, bound to
the job's service account alone. It cannot be narrowed by resourceNames: the node a pod lands on is known only once it
is scheduled. RBAC alone would let any pod of the job cordon, relabel or taint (NoExecute: evict) every node, so a
ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30: POLICY_MIN_KUBERNETES, below
every version of stack/config.py KUBERNETES_VERSIONS) narrows it: a request by exactly this service account on a node
is admitted only when it is an UPDATE (a PATCH is one) of the caller's own node whose one change is adding or
re-valuing the fsdp-eks/bad-node NoSchedule taint: labels, annotations, the other taints, unschedulable and the rest of
the spec unchanged.

The caller's node comes from its token: a pod-bound service account token carries the pod's node in
user.extra['authentication.kubernetes.io/node-name'] (k8s.io/apiserver/pkg/authentication/serviceaccount, NodeNameKey)
when the API server's ServiceAccountTokenPodNodeInfo feature is on: beta and on by default since 1.30
(kubernetes/website, content/*/docs/reference/command-line-tools-reference/feature-gates/
service-account-token-pod-node-info.md), so on for every version the stack offers. A token without it is refused.

The CEL was not evaluated here (no CEL evaluator in the project's environment): tests check the policy's structure.

Pure functions of a JobSpec returning plain dicts.
"""

from __future__ import annotations

from typing import Any

from trainer.base.pod.bad_node import BAD_NODE_TAINT_EFFECT, BAD_NODE_TAINT_KEY, NODE_VERBS
from workloads.job.pod import labels
from workloads.job.spec import JobSpec

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
# The first Kubernetes version with both the policy's v1 API and the token's node name on by default.
POLICY_MIN_KUBERNETES = (1, 30)
# The user.extra key of a pod-bound token's node (k8s.io/apiserver/pkg/authentication/serviceaccount, NodeNameKey).
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# NodeSpec's fields other than taints (k8s.io/api/core/v1 NodeSpec); CEL over a typed object has no "every field
# but one", so each is compared. `?` is CEL's optional field selection: an absent field equals only an absent one.
_OTHER_NODE_SPEC_FIELDS = ("podCIDR", "podCIDRs", "providerID", "unschedulable", "configSource", "externalID")


def node_access_name(spec: JobSpec) -> str:
    """Cluster-scoped, so named after the namespace and the job: two stacks' jobs on one cluster never share it."""
    return f"{spec.namespace}-{spec.name}-node-taint"


def node_cluster_role(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": node_access_name(spec), "labels": labels(spec)},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": list(NODE_VERBS)}],
    }


def node_cluster_role_binding(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": node_access_name(spec), "labels": labels(spec)},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": node_access_name(spec)},
        "subjects": [{"kind": "ServiceAccount", "name": spec.service_account, "namespace": spec.namespace}],
    }


def service_account_username(spec: JobSpec) -> str:
    """The API server's user name for the job's service account (serviceaccount.MakeUsername)."""
    return f"system:serviceaccount:{spec.namespace}:{spec.service_account}"


def node_policy_validations() -> list[dict[str, str]]:
    """The CEL rules a request of the job's service account on a node must all pass."""
    key, effect = BAD_NODE_TAINT_KEY, BAD_NODE_TAINT_EFFECT
    other_taints = f"t, t.key != '{key}'"
    unchanged_spec = " && ".join(f"object.spec.?{f} == oldObject.spec.?{f}" for f in _OTHER_NODE_SPEC_FIELDS)
    return [
        {
            # An empty field is left out of the request CEL sees (json omitempty): read it as optional.
            "expression": "request.operation == 'UPDATE' && request.?subResource.orValue('') == ''",
            "message": f"the job's service account may only patch a node itself (to add the {key} taint)",
        },
        {
            "expression": f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra"
            f" && request.name in request.userInfo.extra['{NODE_NAME_EXTRA}']",
            "message": "the job's service account may only change the node its pod runs on",
        },
        {
            "expression": "object.metadata.?labels == oldObject.metadata.?labels"
            " && object.metadata.?annotations == oldObject.metadata.?annotations",
            "message": "the job's service account may not change a node's labels or annotations",
        },
        {
            "expression": unchanged_spec,
            "message": "the job's service account may not change a node's spec other than its taints",
        },
        {
            "expression": f"object.spec.?taints.orValue([]).filter({other_taints})"
            f" == oldObject.spec.?taints.orValue([]).filter({other_taints})"
            f" && object.spec.?taints.orValue([]).exists(t, t.key == '{key}')"
            f" && object.spec.?taints.orValue([]).all(t, t.key != '{key}' || t.effect == '{effect}')",
            "message": f"the job's service account may only add the {key} taint with effect {effect}",
        },
    ]


def node_admission_policy(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": node_access_name(spec), "labels": labels(spec)},
        "spec": {
            # Fail: a policy that cannot be evaluated must not let the request through.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["*"],
                        "operations": ["*"],
                        "resources": ["nodes", "nodes/*"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "job-service-account",
                    "expression": f"request.userInfo.username == '{service_account_username(spec)}'",
                }
            ],
            "validations": node_policy_validations(),
        },
    }


def node_admission_policy_binding(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": node_access_name(spec), "labels": labels(spec)},
        "spec": {"policyName": node_access_name(spec), "validationActions": ["Deny"]},
    }


def node_access_objects(spec: JobSpec) -> list[dict[str, Any]]:
    """The admission policy and its binding (so that the role is narrowed from its first use), the role, then its
    binding to the job's service account."""
    return [
        node_admission_policy(spec),
        node_admission_policy_binding(spec),
        node_cluster_role(spec),
        node_cluster_role_binding(spec),
    ]
