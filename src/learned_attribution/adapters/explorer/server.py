"""Serve the explorer: check the port first (one line naming it and the flag when taken), load the folds, run
uvicorn on the loopback interface unless told otherwise."""
from __future__ import annotations

import contextlib
import errno
import logging
import socket
import sys
import threading
import time
from typing import Iterator

from learned_attribution.core.errors import InputError
from learned_attribution.services.explore.explorer import Explorer

logger = logging.getLogger(__name__)

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


def check_port(host: str, port: int) -> None:
    """Refuse a port another program holds (an `InputError` naming it and `--port`)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InputError(f"--port {port}: a port is 1 to 65535")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise InputError(f"port {port} on {host} is in use: choose another with --port N") from error
            raise InputError(f"cannot listen on {host}:{port} ({error.strerror or error})") from error


def serve(data_root: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, device: str = "auto") -> None:
    """Run the explorer on `data_root` until interrupted; a refit under way finishes before the process ends."""
    import uvicorn

    from .app import create_app

    check_port(host, port)
    explorer = Explorer(data_root, device=device)
    explorer.preload()
    app = create_app(explorer)
    print(f"explorer of {explorer.data_root} on http://{host}:{port}/ (Ctrl+C to stop)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def free_port(host: str = DEFAULT_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running(explorer: Explorer, host: str = DEFAULT_HOST, port: int | None = None) -> Iterator[str]:
    """The explorer served on a thread of this process (the tests, the first-paint benchmark and the screenshots
    drive it with a browser); yields its address, stops it on exit after any refit under way."""
    import uvicorn

    from .app import create_app

    port = port or free_port(host)
    check_port(host, port)
    server = uvicorn.Server(uvicorn.Config(create_app(explorer), host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="explorer-server", daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        if not thread.is_alive() or time.time() > deadline:
            raise RuntimeError(f"the explorer did not start on {host}:{port}")
        time.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        explorer.jobs.wait(timeout=120)
        server.should_exit = True
        thread.join(timeout=10)
