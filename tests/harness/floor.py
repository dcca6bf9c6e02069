"""The software of the GPU machine this project is lent, simulated on this one: the trainer's torch floor, the
packages that machine lacks, and no network (docs/performance.md, "On a GPU", describes the machine: torch 2.11.0+cu130,
Python 3.12, transformers 5.17, peft; no s3torchconnector, torchao, boto3, datasets or python-etcd; nothing outside it
reachable).

`floor_env()` is what a subprocess needs: PYTHONPATH starts with floor_site/, whose sitecustomize.py calls
`simulate()` as the interpreter starts, before any of the program's imports (torchrun's agent and each worker too).
- Torch: the public names torch 2.12 and 2.13 added that the trainer and the benches could reach are removed
  (POST_FLOOR_TORCH), so a call of one fails as it would on torch 2.11. The list is the difference between torch
  2.11.0's and 2.13.0's modules and classes that the code uses (docs/performance.md, "The torch floor", says how it
  was read); the trainer reaches these through trainer/comms/collectives.py only. They are hidden from code outside
  torch alone: torch 2.13's own modules call them.
- Packages: MISSING_PACKAGES import as absent (`import x` raises ModuleNotFoundError, importlib.util.find_spec returns
  None), as on that machine, unless a folder on PYTHONPATH holds them, as wheels carried there and installed with
  `pip install --target` do (bench/carried_torchtitan.py).
- Network: a connection to any address but the loopback raises OSError, as on that machine; HF_HUB_OFFLINE is set.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
import socket
import sys
import types
from importlib.machinery import PathFinder
from pathlib import Path
from types import FrameType
from typing import Any

from stack.paths import PROJECT_ROOT

SITE = Path(__file__).resolve().parent / "floor_site"
TORCH_FLOOR = "2.11"
"""requirements-trainer.txt's lower bound on torch: the torch of the lent GPU machine."""
POST_FLOOR_TORCH = (
    ("torch.distributed", "all_gather_single"),  # 2.13; all_gather_into_tensor before
    ("torch.distributed", "reduce_scatter_single"),  # 2.13; reduce_scatter_tensor before
    ("torch.nn.functional", "linear_cross_entropy"),  # 2.13
)
MISSING_PACKAGES = ("s3torchconnector", "torchao", "boto3", "botocore", "datasets", "etcd", "kernels")


def _loopback(address: Any) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: resolving it would need the network
        return False


def _guarded(connect: Any) -> Any:
    def connect_loopback_only(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            raise OSError(101, f"Network is unreachable (simulated: {address!r} is off the lent machine)")
        return connect(sock, address)

    return connect_loopback_only


class _AtTheFloor(types.ModuleType):
    """A torch module as code outside torch sees it on the floor: without the names torch added after it. torch's own
    modules still see them (torch 2.13's FSDP2, for one, calls dist.all_gather_single itself)."""

    def __getattribute__(self, name: str) -> Any:
        module = super().__getattribute__("__name__")
        if (module, name) in POST_FLOOR_TORCH and not _inside_torch(sys._getframe(1)):
            raise AttributeError(f"module {module!r} has no attribute {name!r} (not in torch {TORCH_FLOOR})")
        return super().__getattribute__(name)


def _inside_torch(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_TORCH_PACKAGE)


_TORCH_PACKAGE = ""


def carried_paths() -> list[str]:
    """PYTHONPATH's folders but the simulation's own: where wheels carried to the machine are installed (the GPU
    benchmark's --target folder), whose packages are found there as here."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return [entry for entry in entries if entry and Path(entry).resolve() != SITE]


def simulate() -> None:
    """In this interpreter: the torch floor, the missing packages, no network beyond the loopback."""
    global _TORCH_PACKAGE
    for name in MISSING_PACKAGES:
        if PathFinder.find_spec(name, carried_paths()) is None:
            sys.modules[name] = None  # pyright: ignore[reportArgumentType]  # the import system's "not found" marker
    socket.socket.connect = _guarded(socket.socket.connect)
    socket.socket.connect_ex = _guarded(socket.socket.connect_ex)
    import torch

    _TORCH_PACKAGE = str(Path(torch.__file__).parent) + os.sep
    for module_name in {module for module, _ in POST_FLOOR_TORCH}:
        importlib.import_module(module_name).__class__ = _AtTheFloor


def floor_env() -> dict[str, str]:
    """What a subprocess's environment needs under the simulation: the site folder first, the project importable."""
    paths = [str(SITE), str(PROJECT_ROOT)]
    return {"PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1"}
