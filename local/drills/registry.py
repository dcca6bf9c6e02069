"""Every drill by name, in the order `python -m local --help` lists them: a new drill is a module beside this one and
a line here."""

from __future__ import annotations

from local.drills.bad_node import BadNode
from local.drills.base import Drill, DrillError
from local.drills.evict_pod import EvictPod
from local.drills.hung_peer import HungPeer
from local.drills.kill_agent import KillAgent
from local.drills.kill_workers import KillWorkers
from local.drills.lost_storage import LostStorage
from local.drills.restart_etcd import RestartEtcd

DRILLS: dict[str, type[Drill]] = {
    drill.name: drill for drill in (KillAgent, KillWorkers, HungPeer, EvictPod, RestartEtcd, LostStorage, BadNode)
}


def drill_named(name: str) -> type[Drill]:
    """The drill `name`; DrillError naming the drills there are for another."""
    if name not in DRILLS:
        raise DrillError(f"unknown drill {name!r}; drills: {', '.join(DRILLS)}")
    return DRILLS[name]
