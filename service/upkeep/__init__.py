"""Background upkeep run by the process that owns the journal: lifecycle passes
(``lifecycle``), the scrub (``scrub``), webhook deliveries (``webhooks``) and their
Prometheus figures (``metrics``).

May import: ``service.common``, ``service.config``, ``service.engine``, ``service.meta``,
``service.storage``, ``service.ops``, ``service.multipart``, ``service.events``,
``service.observability``, ``service.auth``. Never HTTP.
"""
