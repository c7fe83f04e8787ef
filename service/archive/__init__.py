"""The continuous archive: every payload, journal record and snapshot of a primary copied
to a directory or an rclone remote as they commit, so that a lost disk loses nothing that was
archived, and any point of the retention window can be restored.

``layout`` names the archive's files; ``targets`` writes and reads them (a directory through
the file-system seam, or ``rclone``); ``refs`` finds the payloads records and snapshots
reference; ``shipper`` ships on the primary; ``restore`` builds a data dir from an archive;
``verify`` checks one; ``cli`` is ``python -m service restore`` / ``archive verify``.

May import: ``journal``, ``fsseam``, ``service.common``, ``service.config``, ``service.meta``,
``service.storage``. Never HTTP, never the engine (the shipper is handed what it reads).
"""
