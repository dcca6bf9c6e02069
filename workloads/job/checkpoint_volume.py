"""The checkpoint volume on the stack's FSx for Lustre file system: a PersistentVolume and the claim the job's pods
mount. The volume is provisioned statically, JobSpec.checkpoint names it, and it is the same whichever API runs the
job. A pure function of the JobSpec and the file system's plain strings (stack/file_system.py); the job component
resolves them.
"""

from __future__ import annotations

from typing import Any

from stack.file_system import LustreFileSystem
from workloads.job.pod import labels
from workloads.job.spec import JobSpec


def checkpoint_volume_objects(spec: JobSpec, fs: LustreFileSystem[str]) -> list[dict[str, Any]]:
    """A statically provisioned PersistentVolume on `fs` through the FSx CSI driver, and the claim the job mounts.
    Static provisioning needs only the driver on the nodes, no StorageClass; Retain keeps the checkpoints when the
    job (and its claim) is replaced."""
    claim = spec.checkpoint.claim
    volume_name = f"{claim}-{spec.stack}".lower()[:63].rstrip("-")
    size = f"{fs.capacity_gib}Gi"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name, "labels": labels(spec)},
        "spec": {
            "capacity": {"storage": size},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": ["flock"],
            "csi": {
                "driver": "fsx.csi.aws.com",
                "volumeHandle": fs.file_system_id,
                "volumeAttributes": {"dnsname": fs.dns_name, "mountname": fs.mount_name},
            },
        },
    }
    claim_object = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": spec.namespace, "labels": labels(spec)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name,
            "resources": {"requests": {"storage": size}},
        },
    }
    return [volume, claim_object]
