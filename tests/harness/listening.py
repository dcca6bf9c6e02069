"""Whether a server accepts connections on a loopback port: how a test knows a launcher it started hosts its store."""

from __future__ import annotations

import socket


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
