"""Paths of the web console (``service/http/console.py``): public static files under
``/console/`` and the redirect of ``/`` and ``/console`` there.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates (``/`` shares the
redirect handler of ``/console``, so it is that route's alias, not a path of its own).
"""

from __future__ import annotations

from typing import Any

from service.openapi.operations import PUBLIC, header, header_param, ok, operation

FILE_PATH = {
    "name": "path",
    "in": "path",
    "required": True,
    "description": "A file of the console, relative to `/console/` (`/console/` itself is "
    "`index.html`). Only the console's own files exist; any other path is 404.",
    "schema": {"type": "string"},
}
IF_NONE_MATCH = header_param(
    "If-None-Match",
    "Entity tags the client holds; the file's `ETag` among them answers 304.",
    {"type": "string"},
)
FILE_HEADERS = {
    "ETag": header("A strong entity tag of the file's bytes.", {"type": "string"}),
    "Cache-Control": header(
        "`no-cache` (revalidate), or a year and `immutable` for the versioned files under "
        "`vendor/`.",
        {"type": "string"},
    ),
}
FILE_CONTENT = {
    media: {"schema": {"type": "string"}}
    for media in ("text/html", "text/javascript", "text/css", "application/json", "text/plain")
} | {media: {"schema": {"type": "string", "format": "binary"}} for media in ("image/*",)}
REDIRECT = {
    "description": "Found: the console is at `/console/`.",
    "headers": {"Location": header("`/console/`.", {"type": "string", "const": "/console/"})},
}


def console_paths() -> dict[str, Any]:
    not_modified = ok("Not modified: the client's copy is current.", headers=FILE_HEADERS)
    file_responses = {
        "get": {
            200: ok("The file.", content=FILE_CONTENT, headers=FILE_HEADERS),
            304: not_modified,
        },
        "head": {200: ok("The file's headers, no body.", headers=FILE_HEADERS), 304: not_modified},
    }
    return {
        "/console": {
            method: operation(
                f"{method}ConsoleRedirect",
                "Redirect to the web console (`/` answers the same)",
                tag="console",
                security=PUBLIC,
                head=method == "head",
                responses={302: REDIRECT},
                errors=(),
            )
            for method in ("get", "head")
        },
        "/console/{path}": {
            method: operation(
                f"{method}ConsoleFile",
                "A static file of the web console",
                tag="console",
                security=PUBLIC,
                head=method == "head",
                parameters=[FILE_PATH, IF_NONE_MATCH],
                responses=file_responses[method],
                errors=(404,),
            )
            for method in ("get", "head")
        },
    }
