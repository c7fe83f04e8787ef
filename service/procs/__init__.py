"""The machinery of several serving processes: one writer and ``SERVICE_WORKERS - 1``
workers sharing the port (the roles themselves are assembled in ``service.roles``).

- ``supervisor``: the parent; forks the writer and the workers, restarts, drains.
- ``writer_service`` / ``writer_link`` / ``wire``: the local socket workers commit through
  (the writer's side, the workers' side, the frames between them); ``notes``: what workers
  tell the writer instead of keeping (key uses, request figures).
- ``link_committer`` and ``shared_state``: a worker's engine parts (commits through the
  link, state read from the writer's index); ``fresh_state``: each request starts by asking
  for a fresh look at that index.
- ``forward``: the routes a worker hands to the writer, streamed back.
- ``shared_metrics`` and ``process_table``: every process's metrics and request counts.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.common``,
``service.config``, ``service.meta``, ``service.observability``, ``service.storage``,
``service.index``, ``service.banner``, ``service.engine``,
``service.context``, ``service.http``.

See docs/architecture.md, "Several processes".
"""
