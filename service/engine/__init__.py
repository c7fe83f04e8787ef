"""The engine: the journal, the metadata state and the payload store of one data dir, and the
commit that binds them (``core``); its start (``recovery``); its refusals (``errors``); access
keys' last use, journaled in batches (``key_usage``).

May import: ``journal``, ``fsseam``, ``service.common``, ``service.config``, ``service.meta``,
``service.index``, ``service.storage``, ``service.events`` (the event feed it feeds). Never
HTTP.
"""
