"""Domain operations, free of HTTP: buckets, objects, batch uploads, a bucket's lifecycle rules
and webhooks, and the first start's bootstrap. Each validates, pre-checks against the state,
commits an event through the engine and translates the outcome.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service.common``,
``service.config``, ``service.meta``, ``service.auth``, ``service.storage``,
``service.events``, ``service.engine``.

Never HTTP.
"""
