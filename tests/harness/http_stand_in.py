"""A stand-in HTTP service for a test: a handler class served on a free loopback port, on a thread, while the test
runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How often the serving loop looks for the stop. socketserver's default, 0.5 s, is what every test would otherwise
# wait at its end: shutdown() returns only once the loop has seen it.
STOP_POLL_S = 0.05


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` answering on 127.0.0.1 at the URL given (http://127.0.0.1:<free port>); stopped and closed after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": STOP_POLL_S}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
