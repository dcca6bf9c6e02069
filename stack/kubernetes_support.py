"""Whether the stack's Kubernetes version is still in EKS standard support on a given day.

EKS supports a minor for 14 months at the standard price, then 12 more in extended support at six times the control
plane's price per hour, then upgrades the control plane itself and refuses new clusters of that version (EKS user
guide, "Understand the Kubernetes version lifecycle on EKS"). A stack past its version's standard support is told so
at every preview, with the dates; one past extended support is refused. The dates are stack/versions.py's.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from stack.config import KUBERNETES_VERSIONS, StackConfig
from stack.fields import NAMESPACE
from stack.versions import EKS_CLUSTER_HOUR_USD, EKS_SUPPORT_ENDS

KEY = f"{NAMESPACE}:cluster.kubernetesVersion"


def today() -> date:
    """The day in UTC, the time zone of EKS's calendar."""
    return datetime.now(UTC).date()


def in_standard_support(today: date) -> list[str]:
    """The versions the stack offers whose standard support has not ended by `today`, oldest first."""
    return [version for version in KUBERNETES_VERSIONS if today < EKS_SUPPORT_ENDS[version][0]]


def _upgrade_to(today: date) -> str:
    current = in_standard_support(today)
    if not current:
        return "a newer version (none the stack offers is in standard support any more: bump stack/versions.py)"
    newest = current[-1]
    return f"{newest} (standard support until {EKS_SUPPORT_ENDS[newest][0].isoformat()})"


def kubernetes_version_problems(config: StackConfig, today: date) -> list[str]:
    """A version past EKS's extended support on `today` is refused: EKS no longer creates such clusters and upgrades
    the existing ones itself. A cluster the stack does not manage has its own version."""
    version = config.cluster.kubernetes_version
    if config.cluster.existing or version not in EKS_SUPPORT_ENDS:
        return []  # an unknown version is refused by the field's own check
    extended_end = EKS_SUPPORT_ENDS[version][1]
    if today < extended_end:
        return []
    return [
        f"{KEY}: {version!r} is not allowed; EKS's extended support for it ended on {extended_end.isoformat()} (EKS "
        f"upgrades such clusters itself and creates no new one); expected {_upgrade_to(today)}"
    ]


def kubernetes_version_warning(config: StackConfig, today: date) -> str | None:
    """What a preview says of a version past EKS's standard support on `today`: the dates and the price."""
    version = config.cluster.kubernetes_version
    if config.cluster.existing or version not in EKS_SUPPORT_ENDS:
        return None
    standard_end, extended_end = EKS_SUPPORT_ENDS[version]
    if today < standard_end or today >= extended_end:
        return None
    standard, extended = EKS_CLUSTER_HOUR_USD
    return (
        f"{KEY} {version} left EKS standard support on {standard_end.isoformat()}: the cluster runs in extended "
        f"support, at ${extended:.2f} per cluster-hour instead of ${standard:.2f}, until {extended_end.isoformat()}, "
        f"when EKS upgrades it itself. Upgrade to {_upgrade_to(today)}: pulumi config set --path {KEY} "
        f"{in_standard_support(today)[-1] if in_standard_support(today) else version}"
    )
