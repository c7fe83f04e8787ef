"""``GET /api/v1/openapi.json`` and ``GET /api/v1/docs``: the API's own description, public.

The document is built once per process (``service.openapi``) and its JSON and HTML
encodings are cached here, so a request costs a write.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import functools
import json

from service.http.base import ApiHandler
from service.openapi import openapi_document, render_html

DOCS_POLICY = "; ".join(
    (
        "default-src 'none'",
        "style-src 'unsafe-inline'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "sandbox",
    )
)
"""The docs page is static HTML with one inline stylesheet: nothing on it runs, and it is
sandboxed like user content (it shows text taken from the contract, but a page of this
origin should never be able to run anything but the console)."""


@functools.cache
def document_json() -> bytes:
    return json.dumps(openapi_document(), ensure_ascii=False, indent=1).encode("utf-8")


@functools.cache
def document_html() -> bytes:
    return render_html(openapi_document()).encode("utf-8")


class OpenApiHandler(ApiHandler):
    route_name = "/api/v1/openapi.json"
    public = True
    SUPPORTED_METHODS = ("GET",)

    def get(self) -> None:
        body = document_json()
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.bytes_out = len(body)
        self.finish(body)


class DocsHandler(ApiHandler):
    route_name = "/api/v1/docs"
    public = True
    SUPPORTED_METHODS = ("GET",)

    def get(self) -> None:
        body = document_html()
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Content-Security-Policy", DOCS_POLICY)
        self.bytes_out = len(body)
        self.finish(body)
