"""Background upkeep run by the process that owns the journal: lifecycle passes
(``lifecycle``), the scrub (``scrub``) and their Prometheus figures (``metrics``).

May import: ``service.common``, ``service.config``, ``service.engine.core``, ``service.meta``,
``service.storage``, ``service.ops``, ``service.multipart.operations``, ``service.events``,
``service.observability``. Never HTTP.
"""
