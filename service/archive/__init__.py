"""The continuous archive: every payload, journal record and snapshot of a primary copied
to a directory or an rclone remote as they commit, so that a lost disk loses nothing that was
archived, and any point of the retention window can be restored.

``layout`` names the archive's files; ``targets`` writes and reads them (a directory through
the file-system seam, or ``rclone``); ``refs`` finds the payloads records and snapshots
reference; ``shipper`` ships on the primary; ``restore`` builds a data dir from an archive;
``verify`` checks one; ``cli`` is ``python -m service restore`` / ``archive verify``;
``wiring`` hands the shipper what it reads from a journal owner's engine and committer.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.common``,
``service.meta``, ``service.auth``, ``service.storage``, ``service.startup`` (a restore's
marker), ``service.engine``. Never HTTP; only
the wiring knows the engine, the rest is handed what it reads.
"""
