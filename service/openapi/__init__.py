"""The OpenAPI 3.1 document of the HTTP API, built from Python (``GET /api/v1/openapi.json``).

One module per job: ``schemas`` (response bodies), ``requests`` (request bodies),
``errors`` (the envelope and per-status error responses), ``operations`` (shared building
blocks), ``paths_*`` (the routes, keyed like the handlers' ``route_name``), ``document``
(assembly) and ``html`` (the readable page at ``GET /api/v1/docs``). docs/openapi.md says
how the document is kept exact.

May import (docs/architecture.md, "Layers"): ``service``, ``service.common``, ``service.meta``,
``service.auth``, ``service.audit``, ``service.events``, ``service.ops``, ``service.media``.
"""

from service.openapi.document import openapi_document
from service.openapi.html import render_html

__all__ = ["openapi_document", "render_html"]
