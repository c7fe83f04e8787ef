"""The web console's static files at ``/console/``, and ``/`` redirecting there.

The console is a set of static files shipped inside the package (``service/console/static``,
package data), so an installed server serves it with no Node and no build at run time. It
talks to ``/api/v1`` from the same origin with a bearer token it keeps in the page, so it can
do exactly what its user may do; nothing here needs credentials.

What a static file server must not do, it does not: no directory listings (a directory is 404,
but ``/console/`` itself, which is ``index.html``), no path outside the static root (``..``,
``.``, empty and backslash segments are 404 before the file system is touched, and the
resolved path must stay under the root, so a symlink cannot lead out either), no content type
guessed from the system's ``mimetypes`` (a fixed table; other extensions are 404).

Caching: the vendored libraries carry their version in their file name and are cached for a
year as immutable; every other file is revalidated (``no-cache`` with a strong ``ETag``), so a
new release of the server is seen at the next load. The HTML page also carries a Content
Security Policy that allows only same-origin scripts and the blob: worker hls.js starts.

Thread-safety: handlers live on the event-loop thread; files are read on the engine's
executor.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from service.errors import ApiError
from service.http.base import ApiHandler

STATIC_ROOT = Path(__file__).resolve().parent.parent / "console" / "static"

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


def static_path(path: str, root: Path = STATIC_ROOT) -> Path | None:
    """The file under ``root`` that ``path`` (already percent-decoded) names, or None.

    >>> static_path("../secret") is None, static_path("a//b") is None
    (True, True)
    """
    if path == "":
        path = "index.html"
    parts = path.split("/")
    if any(part in ("", ".", "..") or "\\" in part or "\x00" in part for part in parts):
        return None
    if Path(parts[-1]).suffix not in CONTENT_TYPES:
        return None
    return root.joinpath(*parts)


def read_static(candidate: Path, root: Path = STATIC_ROOT) -> bytes | None:
    """The bytes of ``candidate`` if it is a regular file inside ``root``, else None.

    Blocking: run it on an executor.
    """
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not resolved.is_relative_to(root.resolve()) or not resolved.is_file():
        return None
    try:
        return resolved.read_bytes()
    except OSError:
        return None


class ConsoleFileHandler(ApiHandler):
    """``GET``/``HEAD /console/<path>``: one static file of the console."""

    route_name = "/console/{path}"
    public = True
    SUPPORTED_METHODS = ("GET", "HEAD")

    async def get(self, path: str) -> None:
        candidate = static_path(path)
        body = None
        if candidate is not None:
            body = await self.ctx.engine.run_blocking(read_static, candidate)
        if candidate is None or body is None:
            raise ApiError("NotFound", "no such file in the console")
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        self.set_header("Content-Type", CONTENT_TYPES[candidate.suffix])
        self.set_header("ETag", etag)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        if path.startswith(IMMUTABLE_PREFIX):
            self.set_header("Cache-Control", "public, max-age=31536000, immutable")
        else:
            self.set_header("Cache-Control", "no-cache")
        if candidate.suffix == ".html":
            self.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.set_header("X-Frame-Options", "DENY")
        if etag in _etags(self.request.headers.get("If-None-Match", "")):
            self.set_status(304)
            self.finish()
            return
        self.set_header("Content-Length", str(len(body)))
        self.bytes_out = len(body)
        self.finish(b"" if self.request.method == "HEAD" else body)

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
