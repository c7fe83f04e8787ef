"""The persistent object index beside the journal (issue 12): LMDB, with its files.

Kept out of ``service.meta`` (which is pure: no I/O) because it owns files; ``service.meta``
sees it only through the ``ObjectStore`` protocol (``service.meta.object_index``).

- ``lmdb_index``: ``LmdbObjectIndex``, the object versions in LMDB; ``lmdb_rows``: their
  bytes, and ``StoredRows``, a read transaction a snapshot is streamed from; ``lmdb_listing``:
  object listings walked in bytes;
- ``protocol``: ``PersistentIndex``, what the engine asks of any index (the crash tests run
  a simulated one; ``tests/storage/test_index_contract.py`` runs one suite on both);
- ``opening``: where it lives in the data dir, the marker that tells a machine crash, and
  the start's choice between resuming it and rebuilding it from the journal.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.meta``.
"""
