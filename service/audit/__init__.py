"""The audit log: one hash-chained record per request that reached authorisation.

- ``record``: the record's fields, canonical JSON, the chain and its checker (pure).
- ``segments``: the files (segments of JSON lines, the signed anchor of a pruned log);
  ``docs/audit-format.md`` specifies them.
- ``shared``: ``SharedChain``, the one chain every serving process appends to itself, in
  turn under a lock on ``audit/head`` (the cross-process sequencer).
- ``log``: ``AuditLog``, one process's side of the chain: group-committed appends, retention,
  verification and paged reads.
- ``trail``: ``AuditTrail``, the HTTP layer's side: which answered requests are recorded and
  their fields (principal, path, action...), handed to a sink (the process's log).
- ``actions``: the action of a route and method.

Never ``service.http`` or the engine. See docs/security.md, "Audit log".

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service.common``, ``service.meta``,
``service.auth``.
"""
