"""restart-etcd: the rendezvous store goes away and comes back empty, as when the platform's etcd pod is replaced.

Every agent's next call to etcd fails; it stops its workers and the launcher exits 200 (trainer/base/pod/exits.py) with
the rendezvous left open. restartPolicy ExitCode creates the pods again, they rejoin in the new etcd, and the trainer
resumes from the last checkpoint.
"""

from __future__ import annotations

from local.agents import JobPods
from local.drills.base import Drill, DrillError, Injected
from local.etcd import LocalEtcd

ETCD_DOWN_S = 3.0  # long enough for every agent's next keep-alive or state sync to fail


class RestartEtcd(Drill):
    name = "restart-etcd"

    def check_job(self, nodes: range, replicas: int, local_etcd: bool, elastic: bool) -> None:
        if not local_etcd:
            raise DrillError(f"{self.name} restarts the etcd this run started; leave out --etcd-endpoint")

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        assert etcd is not None  # checked in check_job
        etcd.restart(down_s=ETCD_DOWN_S)
        return Injected(
            f"etcd on {etcd.endpoint} stopped, down {ETCD_DOWN_S:.0f} s, started again with no data", [], []
        )
