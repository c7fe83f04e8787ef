"""Resumable multipart uploads: sessions, parts, complete and abort (``operations``), parts
written in place in the upload's file (``in_place``) and assembly of parts as they arrive
(``assembly``); the file work lives in ``service.storage``.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.common``,
``service.meta``, ``service.storage``, ``service.engine``, ``service.ops``.

Never HTTP.
"""
