"""The engine: the journal, the metadata state and the payload store of one data dir, and the
commit that binds them (``core``); its start (``recovery``); its refusals (``errors``); access
keys' last use, journaled in batches (``key_usage``).

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.common``,
``service.config``, ``service.meta``, ``service.storage``, ``service.index``,
``service.events``.

Never HTTP.
"""
