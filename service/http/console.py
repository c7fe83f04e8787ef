"""The web console's static files at ``/console/``, and ``/`` redirecting there.

The console is a set of static files shipped inside the package (``service/console/static``,
package data), so an installed server serves it with no Node and no build at run time. It
talks to ``/api/v1`` from the same origin with a bearer token it keeps in the page, so it can
do exactly what its user may do; nothing here needs credentials.

What a static file server must not do, it does not: the files served are a catalogue made once
by walking the package's static directory (through the file-system seam), and a request path
is only ever looked up in it, so no client path reaches the file system and ``..`` has nothing
to traverse; directories are never listed (``/console/`` itself is ``index.html``); content
types come from a fixed table, not the system's ``mimetypes`` (other extensions are not in the
catalogue, so they are 404).

Caching: the vendored libraries carry their version in their file name and are cached for a
year as immutable; every other file is revalidated (``no-cache`` with a strong ``ETag``), so a
new release of the server is seen at the next load. The HTML page also carries a Content
Security Policy that allows only same-origin scripts and the blob: worker hls.js starts.

Thread-safety: handlers live on the event-loop thread; files are read on the engine's
executor.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from fsseam.fs import FileSystem
from service.common.api_errors import ApiError
from service.http.base import ApiHandler

STATIC_ROOT = os.path.normpath(
    os.path.join(os.path.dirname(__file__), os.pardir, "console", "static")
)

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}

IMMUTABLE_PREFIX = "vendor/"
"""Files under here have their version in their name: cached for a year."""

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' blob: data:",
        "media-src 'self' blob:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    )
)


def content_type(name: str) -> str | None:
    """The fixed content type of a file name, or None for a type the console does not serve.

    >>> content_type("app.js"), content_type("LICENSE")
    ('text/javascript; charset=utf-8', None)
    """
    return CONTENT_TYPES.get(os.path.splitext(name)[1])


def catalogue(fs: FileSystem, root: str) -> dict[str, str]:
    """Every servable file under ``root``: URL path (``/``-separated, relative) -> file path.

    Blocking: run it on an executor. Directories are walked, never served; files of a type
    outside ``CONTENT_TYPES`` and names starting with a dot are left out.
    """
    found: dict[str, str] = {}

    def walk(directory: str, prefix: str) -> None:
        for name in sorted(fs.listdir(directory)):
            if name.startswith("."):
                continue
            path = os.path.join(directory, name)
            if fs.stat(path).is_dir:
                walk(path, f"{prefix}{name}/")
            elif content_type(name) is not None:
                found[prefix + name] = path

    walk(root, "")
    return found


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    etag: str
    mtime: float


class ConsoleFiles:
    """The console's files, found once and read through the file-system seam.

    A request path is only ever a key of the catalogue made from the static directory, so no
    path a client sends reaches the file system: traversal has nothing to work with. A file's
    bytes are kept after the first read and read again when its modification time changes
    (an edited file is served without a restart while developing the console).
    Thread-safety: ``load`` runs on an executor thread; the dict updates it makes are atomic.
    """

    def __init__(self, fs: FileSystem, root: str = STATIC_ROOT) -> None:
        self.fs = fs
        self.root = root
        self._paths: dict[str, str] | None = None
        self._files: dict[str, StaticFile] = {}

    def load(self, url_path: str) -> StaticFile | None:
        """The file at ``url_path`` (``""`` is ``index.html``), or None. Blocking."""
        if self._paths is None:
            self._paths = catalogue(self.fs, self.root)
        path = self._paths.get(url_path or "index.html")
        if path is None:
            return None
        try:
            mtime = self.fs.stat(path).mtime
            cached = self._files.get(path)
            if cached is not None and cached.mtime == mtime:
                return cached
            source = self.fs.open_read(path)
            try:
                body = source.read()
            finally:
                source.close()
        except OSError:
            return None
        loaded = StaticFile(body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"', mtime)
        self._files[path] = loaded
        return loaded


_console_files: dict[int, ConsoleFiles] = {}


def console_files(fs: FileSystem) -> ConsoleFiles:
    """The one ``ConsoleFiles`` of a file system (one per server process)."""
    files = _console_files.get(id(fs))
    if files is None:
        files = _console_files[id(fs)] = ConsoleFiles(fs)
    return files


class ConsoleFileHandler(ApiHandler):
    """``GET``/``HEAD /console/<path>``: one static file of the console."""

    route_name = "/console/{path}"
    public = True
    SUPPORTED_METHODS = ("GET", "HEAD")

    async def get(self, path: str) -> None:
        files = console_files(self.ctx.engine.fs)
        found = await self.ctx.engine.run_blocking(files.load, path)
        if found is None:
            raise ApiError("NotFound", "no such file in the console")
        name = path or "index.html"
        self.set_header("Content-Type", content_type(name) or "application/octet-stream")
        self.set_header("ETag", found.etag)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        if name.startswith(IMMUTABLE_PREFIX):
            self.set_header("Cache-Control", "public, max-age=31536000, immutable")
        else:
            self.set_header("Cache-Control", "no-cache")
        if name.endswith(".html"):
            self.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.set_header("X-Frame-Options", "DENY")
        if found.etag in _etags(self.request.headers.get("If-None-Match", "")):
            self.set_status(304)
            self.finish()
            return
        self.set_header("Content-Length", str(len(found.body)))
        self.bytes_out = len(found.body)
        self.finish(b"" if self.request.method == "HEAD" else found.body)

    async def head(self, path: str) -> None:
        await self.get(path)


class ConsoleRedirectHandler(ApiHandler):
    """``/`` and ``/console``: a redirect to ``/console/``."""

    route_name = "/console"
    public = True
    SUPPORTED_METHODS = ("GET", "HEAD")

    async def get(self) -> None:
        self.redirect("/console/", permanent=False)

    async def head(self) -> None:
        await self.get()


def _etags(header: str) -> list[str]:
    """The entity tags an ``If-None-Match`` header lists (weak ones compared by their tag).

    >>> _etags('W/"a", "b"')
    ['"a"', '"b"']
    """
    return [tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()]
