"""The HTTP layer: one module per resource, all built on ``base.ApiHandler``.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service``, ``service.common``,
``service.meta``, ``service.observability``, ``service.limits``, ``service.auth``,
``service.storage``, ``service.events``, ``service.audit``, ``service.engine``,
``service.replication``, ``service.ops``,
``service.multipart``, ``service.media``, ``service.openapi``, ``service.context``.
"""
