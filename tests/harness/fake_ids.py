"""Identifiers as AWS and Pulumi form them, derived deterministically from a resource's logical name, so that
distinct resources always get distinct ids and a mix-up between two of them shows in a test.

Formats (what the real services return):
- EC2 ids: a type prefix and 17 lowercase hex digits (vpc-, subnet-, sg-, igw-, nat-, eipalloc-, rtb-, rtbassoc-,
  vpce-, lt-, pg-, sgr-); FSx file systems: fs- and 17 hex digits (EC2 and FSx API references).
- IAM role ids: "AROA" and 17 upper-case alphanumerics; KMS key ids: a UUID.
- Pulumi auto-names: the logical name, "-" and 7 hex digits (pulumi/pulumi sdk resource naming).
- Terraform-style name prefixes (the bridged providers' `namePrefix`): the prefix and a 26-digit
  timestamp-and-counter suffix (terraform-plugin-sdk helper/id.PrefixedUniqueId).
"""

from __future__ import annotations

import hashlib
import uuid

ACCOUNT = "123456789012"


def digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def ec2_id(prefix: str, *parts: str) -> str:
    return f"{prefix}-{digest(prefix, *parts)[:17]}"


def auto_name(name: str) -> str:
    return f"{name}-{digest('autoname', name)[:7]}"


def prefixed_unique_id(prefix: str, *parts: str) -> str:
    return prefix + str(int(digest("prefix", prefix, *parts), 16))[:26].rjust(26, "0")


def key_uuid(*parts: str) -> str:
    return str(uuid.UUID(digest("uuid", *parts)[:32]))


def role_unique_id(*parts: str) -> str:
    return "AROA" + digest("role", *parts)[:17].upper()


def arn(service: str, region: str, resource: str, partition: str = "aws") -> str:
    return f"arn:{partition}:{service}:{region}:{ACCOUNT}:{resource}"
