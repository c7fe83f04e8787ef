"""A small TCP proxy that tests put between a standby and its primary, and that can cut
every connection through it at once (a network cut), or alter what the primary sends (a
byte sequence replaced by another of the same length: bytes damaged on the wire)."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.serverproc import free_port


class CuttingProxy:
    """Forwards ``127.0.0.1:port`` to ``target_port``; ``cut()`` drops every connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.cuts = 0
        self.replace: tuple[bytes, bytes] | None = None
        """While set, each occurrence of the first in a read from the primary becomes the
        second (an occurrence split between two reads passes unchanged)."""
        self._upstreams: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._lock:
            sockets, self._open = self._open, set()
            self.cuts += 1
        for each in sockets:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
                self._upstreams.add(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                replace = self.replace
                if replace is not None and source in self._upstreams:
                    data = data.replace(*replace)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for each in (source, sink):
                with contextlib.suppress(OSError):
                    each.shutdown(socket.SHUT_RDWR)
            with self._lock:
                mine = source in self._open  # else a cut (or the other pump) closed them
                self._open.discard(source)
                self._open.discard(sink)
                self._upstreams.discard(source)
                self._upstreams.discard(sink)
            if mine:
                source.close()
                sink.close()
