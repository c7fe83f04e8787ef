"""Cross-origin requests (CORS): which origins may call the API from a browser, and the
answers to their preflights.

``SERVICE_CORS_ORIGINS`` is a comma-separated list of origins (``https://app.example.com``)
or ``*``; empty (the default) means same-origin only: no CORS headers, and a preflight is
refused. An allowed origin gets ``Access-Control-Allow-Origin`` (its own origin, with
``Vary: Origin``, or ``*``) and ``Access-Control-Expose-Headers`` on every ``/api/v1``
answer, presigned URLs included, errors included (so a page can read the envelope). Share
playback allows any origin whatever the setting: the token in its URL is the credential.

Decisions where the contract is silent (docs/security.md "CORS"): no
``Access-Control-Allow-Credentials`` (the API authenticates with an ``Authorization`` header
a page sets itself, never with cookies, and ``*`` forbids credentials anyway); a preflight
from an origin that is not allowed is 403 AccessDenied; a preflight allows the methods of
the API and echoes the request headers it asks for when they are HTTP tokens; its answer may
be cached for ``MAX_AGE_SECONDS``.

Pure; safe from any thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EXPOSED_HEADERS = "ETag, X-Checksum-Sha256, X-Version-Id, X-Request-Id, Content-Range"
ALLOWED_METHODS = "GET, HEAD, PUT, POST, PATCH, DELETE"
MAX_AGE_SECONDS = 600
_TOKEN_LIST = re.compile(
    r"[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*"
)
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s,]+")


def normalize_origin(origin: str) -> str:
    """An origin as compared: lowercase, no trailing slash.

    >>> normalize_origin("HTTPS://App.Example.com/")
    'https://app.example.com'
    """
    return origin.strip().rstrip("/").lower()


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """The origins allowed to call the API from a browser."""

    origins: frozenset[str] = frozenset()
    any_origin: bool = False

    @classmethod
    def parse(cls, setting: str) -> CorsPolicy:
        """``SERVICE_CORS_ORIGINS``; raises ValueError naming a malformed origin.

        >>> CorsPolicy.parse("*").any_origin, CorsPolicy.parse("").origins
        (True, frozenset())
        >>> sorted(CorsPolicy.parse("https://a.example, http://localhost:3000").origins)
        ['http://localhost:3000', 'https://a.example']
        """
        items = [normalize_origin(item) for item in setting.split(",") if item.strip()]
        if items == ["*"]:
            return cls(any_origin=True)
        for item in items:
            if _ORIGIN.fullmatch(item) is None:
                raise ValueError(
                    f"CORS origin {item!r} must look like https://host[:port] (or be * alone)"
                )
        return cls(origins=frozenset(items))

    def allow(self, origin: str | None, *, public: bool = False) -> str | None:
        """The ``Access-Control-Allow-Origin`` value for a request from ``origin``, or None.

        ``public`` marks a route open to every origin (share playback).
        """
        if public:
            return "*"
        if origin is None:
            return None
        if self.any_origin:
            return "*"
        return origin if normalize_origin(origin) in self.origins else None

    def headers(self, origin: str | None, *, public: bool = False) -> list[tuple[str, str]]:
        """The CORS headers of an ordinary answer to a request from ``origin``."""
        allowed = self.allow(origin, public=public)
        if allowed is None:
            return [("Vary", "Origin")] if self.origins else []
        headers = [
            ("Access-Control-Allow-Origin", allowed),
            ("Access-Control-Expose-Headers", EXPOSED_HEADERS),
        ]
        if allowed != "*":
            headers.append(("Vary", "Origin"))
        return headers

    def preflight(
        self, origin: str | None, requested_headers: str | None, *, public: bool = False
    ) -> list[tuple[str, str]] | None:
        """The headers of a 204 answer to a preflight, or None to refuse it (403)."""
        allowed = self.allow(origin, public=public)
        if allowed is None:
            return None
        headers = [
            ("Access-Control-Allow-Origin", allowed),
            ("Access-Control-Allow-Methods", ALLOWED_METHODS),
            ("Access-Control-Max-Age", str(MAX_AGE_SECONDS)),
        ]
        wanted = (requested_headers or "").strip()
        if wanted and _TOKEN_LIST.fullmatch(wanted):
            headers.append(("Access-Control-Allow-Headers", wanted))
        if allowed != "*":
            headers.append(("Vary", "Origin"))
        return headers
