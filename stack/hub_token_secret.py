"""`job.hfTokenSecret`: the AWS Secrets Manager secret whose SecretString is the Hugging Face token, named by its name
or its ARN. What a valid reference is, the ARN pattern an IAM policy grants on, and where the former secret config
keys went. Pure: the config check (stack/config.py, stack/parse.py) and the IAM document (infra/hub_token_access.py)
read the same rules.

The token never enters the stack's config or state: the stack names the secret, and the job's pods read it at start
through a Pod Identity role allowed GetSecretValue on that secret alone (trainer/base/pod/hub_token.py).
"""

from __future__ import annotations

import re

from stack.fields import NAMESPACE
from stack.names import SECRET_NAME_PREFIX

KEY = "job.hfTokenSecret"
# A secret's name: 1 to 512 ASCII letters, digits and /_+=.@- (Secrets Manager API reference, CreateSecret: Name,
# "The secret name can contain ASCII letters, numbers, and the following characters: /_+=.@-"; botocore's service
# model secretsmanager/2017-10-17 NameType: min 1, max 512). No name contains ':', so an ARN is never a name.
SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
# A complete secret ARN: arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX. Secrets Manager appends a
# hyphen and six random characters to the name (CreateSecret: "Secrets Manager automatically adds a hyphen and six
# random characters after the secret name at the end of the ARN"). A partial ARN (without them) is refused: an IAM
# policy whose resource is a partial ARN matches no request, so the pods would be denied.
SECRET_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):secretsmanager:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"secret:(?P<name>[A-Za-z0-9/_+=.@-]+)-[A-Za-z0-9]{6}$"
)
# The six characters in an IAM resource pattern: `?` matches exactly one character (IAM user guide, "IAM JSON policy
# elements: Resource", wildcards), so the name's own secret matches and `NAME-other` does not.
RANDOM_SUFFIX_PATTERN = "-??????"
# The secret name the docs and the shipped stack files use: under the prefix a CI-deployed stack's roles may read.
DOCUMENTED_NAME = f"{SECRET_NAME_PREFIX}hf-token"


def is_secret_arn(reference: str) -> bool:
    return reference.startswith("arn:")


def secret_reference_problem(reference: object) -> str | None:
    """What is allowed when `reference` is no secret name or complete secret ARN; None when it is one."""
    if isinstance(reference, str) and (
        SECRET_ARN.match(reference) if is_secret_arn(reference) else SECRET_NAME.match(reference)
    ):
        return None
    return (
        "the name of a Secrets Manager secret (1-512 letters, digits and /_+=.@-) or its complete ARN "
        "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX, as `aws secretsmanager describe-secret` prints it)"
    )


def secret_region_problems(reference: str | None, region: str) -> list[str]:
    """The problem of an ARN in another region than the stack's; empty for a name (always the stack's region)."""
    match = SECRET_ARN.match(reference) if reference else None
    if match is None or match["region"] == region:
        return []
    return [
        f"{NAMESPACE}:{KEY}: {reference!r} is not allowed; expected a secret in the stack's region {region} (the "
        f"job's pods call Secrets Manager there), not in {match['region']}"
    ]


def secret_name(reference: str) -> str:
    """The secret's name: the reference itself, or the name part of a complete ARN (without the six random
    characters, which follow the name and so never change whether it starts with a prefix)."""
    match = SECRET_ARN.match(reference)
    return match["name"] if match else reference


def secret_prefix_problems(reference: str | None, ci_deployed: bool) -> list[str]:
    """The problem of a secret outside SECRET_NAME_PREFIX on a stack CI deploys: the permissions boundary its roles
    carry allows reading only secrets so named (ci/role_boundary.py), so the job's pods would be denied the token at
    start, after the whole stack is up. A stack deployed without the boundary may name any secret."""
    if reference is None or not ci_deployed or secret_name(reference).startswith(SECRET_NAME_PREFIX):
        return []
    return [
        f"{NAMESPACE}:{KEY}: {reference!r} is not allowed with cluster.rolePermissionsBoundary; expected a secret "
        f"whose name starts {SECRET_NAME_PREFIX!r}, such as {DOCUMENTED_NAME!r} (the permissions boundary lets the "
        "stack's roles read only secrets so named)"
    ]


def secret_resource(reference: str, partition: str, region: str, account: str) -> str:
    """The IAM resource that is this one secret: an ARN as given; for a name, the ARN with the six random
    characters matched by wildcards."""
    if is_secret_arn(reference):
        return reference
    return f"arn:{partition}:secretsmanager:{region}:{account}:secret:{reference}{RANDOM_SUFFIX_PATTERN}"


# The former secret config keys, each with where it moved: a stack that still sets one is refused with this message,
# so no secret lingers in a stack file. The token went into Secrets Manager (named by job.hfTokenSecret); the
# kubeconfig went nowhere (an existing cluster is reached by its name).
MOVED_KEYS = {
    f"{NAMESPACE}:hfToken": (
        f"{NAMESPACE}:hfToken: no longer read; the Hugging Face token lives in AWS Secrets Manager. Create the secret "
        f"with `aws secretsmanager create-secret --name {DOCUMENTED_NAME} --secret-string hf_...`, name it with "
        f"`pulumi config set --path {NAMESPACE}:{KEY} {DOCUMENTED_NAME}`, then remove the old key with "
        f"`pulumi config rm {NAMESPACE}:hfToken`"
    ),
    f"{NAMESPACE}:kubeconfig": (
        f"{NAMESPACE}:kubeconfig: no longer read; an existing cluster (cluster.existing) is reached through its name "
        f"and the caller's AWS identity (aws eks get-token). Remove it with `pulumi config rm {NAMESPACE}:kubeconfig`"
    ),
}
