"""The dashboard's web server: two routes, bounded under load.

`make_server(catalog, host, port)` answers `/` (the page `page.html`, its script and
style inline, nothing fetched from the internet) and `/api/state` (the JSON of
`state.state`), and nothing else: the browser sends no path, file name or SQL that
reaches the machine, and any other route is a 404.

Under load (an unbounded server let many of 200 concurrent requests time out, and
held a thread per half-sent request: benchmarks/README.md): the state is computed at most once per
refresh interval and the same bytes serve every request meanwhile (`StateCache`);
requests are handled by a bounded pool of `THREADS` threads with at most `PENDING`
connections waiting for one (beyond, an immediate 503), each socket with a
`SOCKET_TIMEOUT`; the page polls again only when its last poll has ended. Requests whose
`Host` header is not a name the server was bound to are refused with 403 (a page of
another site cannot read the state through DNS rebinding).
"""

import io
import json
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from puzzlesweep.catalog import CatalogDamaged
from puzzlesweep.core import BadInput
from puzzlesweep.dashboard.state import state

#: Request threads of one server; connections whose request head is still arriving
#: (held by one reception thread, not by request threads); requests whose head has come,
#: waiting for a thread; seconds a connection may take to send its head, and a socket
#: may stay silent after; the longest head read.
THREADS = 16
RECEIVING = 1024
PENDING = 256
SOCKET_TIMEOUT = 5.0
HEAD_BYTES = 16384


class StateCache:
    """The state of one catalog as JSON bytes, computed at most once per `interval`
    seconds whatever the number of requests: callers that arrive while it is computed
    wait for that computation and share its result. `computed` counts computations."""

    def __init__(self, catalog: str, interval: float):
        self.catalog, self.interval = catalog, interval
        self.computed = 0
        self._lock = threading.Lock()
        self._body: bytes | None = None
        self._at = 0.0

    def get(self) -> bytes:
        """The state's JSON, computed now if the last one is older than `interval`."""
        with self._lock:
            if self._body is None or time.monotonic() - self._at >= self.interval:
                try:
                    self._body = json.dumps(state(self.catalog), default=str).encode()
                except (BadInput, CatalogDamaged) as exc:  # its own one line, as the CLI's
                    self._body = json.dumps({"error": str(exc)}).encode()
                except Exception as exc:  # a broken file must not take the page down
                    self._body = json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()
                self._at = time.monotonic()
                self.computed += 1
            return self._body


class _Handler(BaseHTTPRequestHandler):
    """Serves `/` and `/api/state` for one catalog; everything else is 404."""

    catalog = "results"
    refresh_seconds = 3.0
    timeout = SOCKET_TIMEOUT  # per socket operation (StreamRequestHandler applies it)

    def _host_allowed(self) -> bool:
        """Is the request's Host header one of the server's names (`allowed_hosts`)?"""
        host = (self.headers.get("Host") or "").strip().lower()
        return host in self.server.allowed_hosts

    def setup(self) -> None:
        super().setup()
        head = getattr(self.server.local, "head", None)
        if head is not None:  # the request head the reception thread read already
            self.rfile = io.BytesIO(head)

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        if not self._host_allowed():
            self._send(HTTPStatus.FORBIDDEN, "text/plain; charset=utf-8", b"host not allowed\n")
        elif self.path == "/":
            page = PAGE.replace("__REFRESH_MS__", str(int(self.refresh_seconds * 1000)))
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", page.encode())
        elif self.path == "/api/state":
            self._send(HTTPStatus.OK, "application/json", self.server.cache.get())
        else:
            self._send(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found\n")

    def do_POST(self) -> None:  # noqa: N802
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", b"read-only\n")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _send(self, status: HTTPStatus, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", "default-src 'self' 'unsafe-inline'")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no access log on stderr."""


BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 5\r\nRetry-After: 1\r\n\r\nbusy\n"


class BoundedHTTPServer(HTTPServer):
    """An HTTP server that never gives a thread to a connection before its request head
    has arrived: one reception thread reads the heads of up to `RECEIVING` connections
    at once (non-blocking, each within `SOCKET_TIMEOUT` seconds, else it is closed), then
    hands each whole head to a pool of `THREADS` request threads, with at most `PENDING`
    requests waiting for one. A connection beyond those bounds gets an immediate 503.
    `cache` (a StateCache) and `allowed_hosts` (the Host header values it answers) are
    set by `make_server`."""

    cache: StateCache
    allowed_hosts: frozenset[str]
    request_queue_size = 256  # the listen backlog (socketserver's 5 drops bursts of SYNs)

    def server_activate(self) -> None:
        super().server_activate()
        self.pool = ThreadPoolExecutor(
            THREADS, thread_name_prefix=f"dashboard-{self.server_address[1]}"
        )
        self.slots = threading.BoundedSemaphore(THREADS + PENDING)
        self.local = threading.local()
        self.selector = selectors.DefaultSelector()
        self.receiving: dict[socket.socket, tuple[float, bytearray, Any]] = {}
        self.arrivals: list = []
        self.arrivals_lock = threading.Lock()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        threading.Thread(target=self._receive, name="dashboard-reception", daemon=True).start()

    def process_request(self, request, client_address) -> None:
        with self.arrivals_lock:
            self.arrivals.append((request, client_address))
        try:
            self.wake_w.send(b"\0")
        except OSError:
            pass

    @staticmethod
    def _refuse(request) -> None:
        try:
            request.setblocking(True)
            request.settimeout(1.0)
            request.sendall(BUSY)
        except OSError:
            pass

    def _receive(self) -> None:
        """The reception thread: read request heads, hand whole ones to the pool."""
        while True:
            try:
                events = self.selector.select(timeout=0.5)
            except (OSError, ValueError):  # closed
                return
            for key, _ in events:
                if key.fileobj is self.wake_r:
                    self._admit()
                else:
                    self._read(key.fileobj)
            now = time.monotonic()
            for request in [r for r, (t, _, _) in self.receiving.items() if t < now]:
                self._drop(request)  # too slow to send its head

    def _admit(self) -> None:
        try:
            self.wake_r.recv(4096)
        except OSError:
            pass
        with self.arrivals_lock:
            arrivals, self.arrivals = self.arrivals, []
        for request, client_address in arrivals:
            if len(self.receiving) >= RECEIVING:
                self._refuse(request)
                self.shutdown_request(request)
                continue
            request.setblocking(False)
            deadline = time.monotonic() + SOCKET_TIMEOUT
            self.receiving[request] = (deadline, bytearray(), client_address)
            self.selector.register(request, selectors.EVENT_READ)

    def _drop(self, request) -> None:
        self.selector.unregister(request)
        del self.receiving[request]
        self.shutdown_request(request)

    def _read(self, request) -> None:
        _, head, client_address = self.receiving[request]
        try:
            chunk = request.recv(HEAD_BYTES)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(request)
            return
        head += chunk
        if b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) < HEAD_BYTES:
            return
        self.selector.unregister(request)
        del self.receiving[request]
        request.setblocking(True)
        if not self.slots.acquire(blocking=False):
            self._refuse(request)
            self.shutdown_request(request)
            return
        self.pool.submit(self._work, request, client_address, bytes(head))

    def _work(self, request, client_address, head: bytes) -> None:
        self.local.head = head
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 (a broken connection: drop it)
            pass
        finally:
            self.local.head = None
            self.shutdown_request(request)
            self.slots.release()

    def server_close(self) -> None:
        super().server_close()
        if hasattr(self, "pool"):
            self.selector.close()
            for request in list(self.receiving):
                self.shutdown_request(request)
            self.wake_w.close()
            self.pool.shutdown(wait=False, cancel_futures=True)


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values a server bound to host:port answers: the host it was given
    and, when that is a loopback or wildcard address, `localhost` and the loopback
    addresses; for a wildcard address also this machine's names. Each with the port."""
    names = {host.lower()}
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    names = {f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names}
    return frozenset(f"{n}:{port}" for n in names if n)


def make_server(
    catalog: str | Path, host: str = "127.0.0.1", port: int = 8050, refresh_seconds: float = 3.0
) -> BoundedHTTPServer:
    """A ready server (not yet serving) for `catalog` on host:port (port 0 picks a free
    one; read it back from `server.server_address`), computing the state at most once
    per `refresh_seconds` (StateCache). Raises OSError if the port is taken."""
    handler = type(
        "Handler", (_Handler,), {"catalog": str(catalog), "refresh_seconds": refresh_seconds}
    )
    server = BoundedHTTPServer((host, port), handler)
    server.cache = StateCache(str(catalog), refresh_seconds)
    server.allowed_hosts = allowed_hosts(host, server.server_address[1])
    return server


def serve_in_thread(catalog: str | Path, host: str = "127.0.0.1", port: int = 0):
    """Start a server on a daemon thread; returns (server, "http://host:port")."""
    server = make_server(catalog, host, port, refresh_seconds=1.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host}:{bound_port}"


PAGE = (resources.files("puzzlesweep.dashboard") / "page.html").read_text()
