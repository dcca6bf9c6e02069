"""The launcher's hold on the rendezvous: torchrun's own handlers, except that closing waits for the launcher.

torchrun's launch_agent calls the rendezvous handler's shutdown() on every way out but a stop signal
(torch/distributed/launcher/api.py, launch_agent: `finally: if shutdown_rdzv: spec.rdzv_handler.shutdown()`), and
shutdown marks the rendezvous closed in its backend for good (rendezvous/dynamic_rendezvous.py,
DynamicRendezvousHandler.shutdown and _RendezvousCloseOp; a node that finds it closed raises RendezvousClosedError).
That is right when the job is over, and wrong when the backend itself failed: by the time the agent's workers have
stopped (they get --shutdown-timeout to settle a checkpoint), etcd may be back, restarted with its data or empty, and
the closed state written into it then outlives the agent (the etcd-v2 backend writes every state with a two-hour TTL,
rendezvous/etcd_rendezvous_backend.py EtcdRendezvousBackend) and fails every pod created again to rejoin.

So while `held_rendezvous_shutdowns()` is active, every handler torchrun creates comes wrapped in HeldShutdown, which
passes everything to torch's handler but shutdown(): that only records the request, and `finish(close=...)` carries it
out once the launcher knows how the run ended (trainer/launch/launcher.py). The etcd-v2 handler is torch's with its
store keyed by the state's generation, so that a state that expired and began again at round 0 finds none of the
earlier rounds' keys (trainer/launch/etcd_generation.py).

The wrapper also sees every round the agent joins, and so is where the nodes of a round agree on the workers' attempt
id (trainer/base/pod/attempt.py): each next_rendezvous sets it in the agent's environment, which the workers it starts
next inherit. And it is where a node that is stopped (the kubelet's SIGTERM: a drain for a node-group update, the end of
a capacity block, an eviction) says so in the round's store (`announce_leaving`), before its workers go: the other
nodes' agents then restart their workers without spending one of their --max-restarts on it
(trainer/launch/agent.py), since a node that leaves on request is no fault of the job.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from torch.distributed import DistStoreError, Store
from torch.distributed.elastic.rendezvous import (
    RendezvousHandler,
    RendezvousHandlerCreator,
    RendezvousHandlerRegistry,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousTimeoutError,
    rendezvous_handler_registry,
)

from trainer.base.pod.attempt import ATTEMPT_ENV, agree_attempt
from trainer.launch.gang import gang_restarts

log = logging.getLogger(__name__)

# torch 2.13's dynamic rendezvous (the etcd-v2 and c10d backends) shares one TCP store per job by default: the agent
# that is node 0 when it first joins starts it and publishes its address in that round's store, and every handler
# caches the address it first read (dynamic_rendezvous.py next_rendezvous: `_bootstrap_store_info` is built only
# when None, or for a node 0 without a server). A node that joins a later round, the pod created again after a drain
# or an eviction, or a node's replacement, then waits for an address nobody publishes in that round, and node 0
# waits for it (`_assign_worker_ranks`) until the store's timeout: the job never re-forms (the evict-pod drill
# showed it). And where node 0 itself is lost, the other nodes keep handing their workers the dead node's address.
# With sharing off, node 0 publishes a fresh address in every round and every node reads it there; the workers'
# global rank 0 serves the attempt's store (torch/distributed/rendezvous.py _create_c10d_store).
SHARED_STORE_SWITCH = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"

ATTEMPT_LINE_PREFIX = "trainer.launch rendezvous: "
# What a round's store raises when a key is not set within its timeout: torch's TCPStore and PrefixStore a
# DistStoreError, the etcd-v2 backend's EtcdStore a LookupError (torch 2.13 elastic/rendezvous/etcd_store.py get).
STORE_TIMEOUTS = (DistStoreError, LookupError)
ETCD_V2 = "etcd-v2"  # the backend whose store outlives its state (trainer/launch/etcd_generation.py)
# In the round's store: how many nodes of the round were stopped by a signal (trainer/launch/agent.py reads it).
NODES_LEAVING_KEY = "trainer/nodes-leaving"


class HeldShutdown(RendezvousHandler):
    """torch's rendezvous handler for one backend; its shutdown waits for `finish`."""

    def __init__(self, handler: RendezvousHandler) -> None:
        self.handler = handler
        self.shutdown_requested = False
        self.round_store: Store | None = None  # the store of the round joined last

    def get_backend(self) -> str:
        return self.handler.get_backend()

    @property
    def use_agent_store(self) -> bool:
        return self.handler.use_agent_store

    def next_rendezvous(self) -> RendezvousInfo:
        """torch's round, and the attempt id its nodes agree on, set for the workers the agent starts next."""
        info = self.handler.next_rendezvous()
        self.round_store = info.store
        earlier = gang_restarts(os.environ)  # a TrainJob's earlier gangs, each with a rendezvous of its own
        try:
            attempt = agree_attempt(info.store, info.rank, self.handler.get_run_id(), earlier_starts=earlier)
        except STORE_TIMEOUTS as error:
            # Node 0 never wrote the id within the store's timeout (it left, or its store did): the round did not
            # complete, as a join that timed out, and the launcher ends retryable with the rendezvous left open.
            raise RendezvousTimeoutError(
                f"node {info.rank} of {info.world_size} read no workers' attempt id from the round's store: {error}"
            ) from error
        os.environ[ATTEMPT_ENV] = attempt
        # On stderr, where the pod's log has it: the one place that shows which start of the workers a log line is of.
        print(f"{ATTEMPT_LINE_PREFIX}joined as node {info.rank} of {info.world_size}; workers' attempt {attempt}",
              file=sys.stderr, flush=True)  # fmt: skip
        return info

    def announce_leaving(self) -> threading.Thread | None:
        """Count this node as leaving on request in the round's store, in a thread of its own: called from a signal
        handler, in the thread that may be inside a call to the same store. The agent then gives its workers
        --shutdown-timeout to stop, time enough for one write. None when no round was joined yet."""
        store = self.round_store
        if store is None:
            return None

        def write() -> None:
            try:
                store.add(NODES_LEAVING_KEY, 1)
            except Exception:  # the backend may be what failed; the peers then count the restart, as before
                log.warning("could not tell the other nodes that this one is leaving", exc_info=True)

        thread = threading.Thread(target=write, name="announce-leaving", daemon=True)
        thread.start()
        return thread

    def is_closed(self) -> bool:
        return self.handler.is_closed()

    def set_closed(self) -> None:
        self.handler.set_closed()

    def num_nodes_waiting(self) -> int:
        return self.handler.num_nodes_waiting()

    def get_run_id(self) -> str:
        return self.handler.get_run_id()

    def shutdown(self) -> bool:
        """What launch_agent calls on its way out: recorded, not done (see `finish`)."""
        self.shutdown_requested = True
        return True

    def finish(self, close: bool) -> bool:
        """Shut the rendezvous down (torch's shutdown: it closes it) if torchrun asked to and `close` allows it;
        returns whether it was closed. A backend that fails now is logged, not raised: the exit code is decided."""
        if not (self.shutdown_requested and close):
            return False
        try:
            return bool(self.handler.shutdown())
        except Exception:
            log.warning("the rendezvous could not be closed", exc_info=True)
            return False


def _holding(create: RendezvousHandlerCreator, held: list[HeldShutdown]) -> RendezvousHandlerCreator:
    def create_held(params: RendezvousParameters) -> RendezvousHandler:
        handler = HeldShutdown(create(params))
        held.append(handler)
        return handler

    return create_held


def _generational_etcd_v2(params: RendezvousParameters) -> RendezvousHandler:
    """torch's etcd-v2 handler with its store keyed by the state's generation (trainer/launch/etcd_generation.py);
    imported here, as torch imports its own, so that a launch without python-etcd never needs it."""
    from trainer.launch.etcd_generation import create_generational_handler

    return create_generational_handler(params)


@contextmanager
def held_rendezvous_shutdowns(
    registry: RendezvousHandlerRegistry = rendezvous_handler_registry,
) -> Iterator[list[HeldShutdown]]:
    """Every rendezvous handler `registry` creates meanwhile (launch_agent asks torch's default registry, through
    rendezvous/registry.py get_rendezvous_handler) is a HeldShutdown; the list yielded collects them."""
    held: list[HeldShutdown] = []
    sharing = os.environ.get(SHARED_STORE_SWITCH)
    os.environ.setdefault(SHARED_STORE_SWITCH, "1")  # read by each handler's next_rendezvous; see its comment
    # register() refuses a second creator for a backend name and the registry has no other way to replace one, so
    # the creators are swapped in its table, and the originals put back on the way out.
    creators = registry._registry
    originals = dict(creators)
    ours = {**originals, **({ETCD_V2: _generational_etcd_v2} if ETCD_V2 in originals else {})}
    creators.update({backend: _holding(create, held) for backend, create in ours.items()})
    try:
        yield held
    finally:
        creators.clear()
        creators.update(originals)
        if sharing is None:
            os.environ.pop(SHARED_STORE_SWITCH, None)
