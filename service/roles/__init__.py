"""Roles: what a serving process is, as a set of parts chosen once at start.

``service.server.serve`` runs the same steps for every role and asks the role for its
parts; a role never becomes a flag that shared code reads.

- ``single``: the only process. Its engine commits to its own journal and reads its own
  state (``JournalCommitter`` over ``OwnState``); it runs the journal owner's background
  work (``journal_owner``) and serves every route.
- ``writer``: the process of several that writes the journal: a single process, plus the
  commit socket its workers commit through, the internal HTTP listener it answers their
  forwarded routes on, and the figures of every process.
- ``worker``: one of the others. Its engine commits through the writer and reads the
  writer's index (``LinkCommitter`` over ``SharedIndexState``); it forwards the routes whose
  answer lives in the writer's memory (``Home.JOURNAL``) and runs no background work.

Each role module is one class with the same members (``Role`` below). Adding a role (a
standby following a shipped journal, say) is a new module here and a new way to start it;
docs/architecture.md, "Roles", walks through one.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service.common``,
``service.config``, ``service.meta``, ``service.observability``, ``service.banner``,
``service.engine``, ``service.archive``, ``service.replication``, ``service.ops``,
``service.multipart``,
``service.media``, ``service.upkeep``, ``service.context``, ``service.http``, ``service.procs``,
``service.app``.
"""
