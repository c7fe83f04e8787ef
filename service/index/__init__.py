"""The persistent object index beside the journal (issue 12): LMDB, with its files.

Kept out of ``service.meta`` (which is pure: no I/O) because it owns files; ``service.meta``
sees it only through the ``ObjectStore`` protocol (``service.meta.object_index``).

- ``lmdb_index``: ``LmdbObjectIndex``, the object versions in LMDB, and ``StoredRows``, a
  read transaction a snapshot is streamed from;
- ``opening``: where it lives in the data dir, the marker that tells a machine crash, and
  the start's choice between resuming it and rebuilding it from the journal.
"""
