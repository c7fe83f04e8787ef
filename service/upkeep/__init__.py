"""Background upkeep run by the process that owns the journal: lifecycle passes
(``lifecycle``), the scrub (``scrub``), webhook deliveries (``webhooks``) and their
Prometheus figures (``metrics``).

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service.common``,
``service.config``, ``service.meta``, ``service.storage``, ``service.events``,
``service.engine``, ``service.ops``, ``service.multipart``.

Never HTTP.
"""
