"""A small local HTTP server that receives webhook deliveries, for the tests.

It records every POST it acknowledges (headers and body), and answers 500 to the first
``fail_first`` attempts, so tests can check retries, order and signatures. With
``answer_delay`` it answers that many seconds after recording a delivery (a slow receiver:
the sender has the event in flight meanwhile).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A sender killed mid-connection resets it: expected here, not worth a traceback."""


@dataclass
class Delivery:
    event_id: str
    signature: str
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.body)
        return doc

    def signed_with(self, secret: str) -> bool:
        expected = hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.signature)


@dataclass
class Receiver:
    fail_first: int = 0
    answer_delay: float = 0.0
    attempts: int = 0
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def __enter__(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) != length:
                    return  # the sender died mid-request (a SIGKILL): nothing was delivered
                with receiver.lock:
                    receiver.attempts += 1
                    failing = receiver.attempts <= receiver.fail_first
                    if not failing:
                        receiver.deliveries.append(
                            Delivery(
                                self.headers.get("X-Event-Id", ""),
                                self.headers.get("X-Signature-Sha256", ""),
                                body,
                            )
                        )
                time.sleep(receiver.answer_delay)
                self.send_response(500 if failing else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def received(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)
