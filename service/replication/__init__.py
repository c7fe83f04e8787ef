"""Replication: a standby that follows a primary's journal (docs/replication.md).

- ``wire``: the stream's paths, headers and numbers, shared by both sides.
- ``feed``: on the primary, what each standby reads (snapshot, records, payloads) and where
  each one is (a ``ReaderHolds`` position, like a Postgres replication slot).
- ``payloads``: on the standby, a payload fetched, verified by SHA-256 and fsynced before
  any record that references it is appended.
- ``source``: where the standby's copies come from (its primary over HTTP; the crash
  matrix hands the same code an in-process primary).
- ``bootstrap``: a fresh standby's copy of the primary's newest snapshot and its payloads,
  resumable after a crash without copying again what it holds.
- ``committer``: the standby's committer, which refuses every mutation but the shipped
  records; ``follower``: the loop that fetches and applies them, and the lag it reports.
- ``epochs``: the data dir's identity, a primary's epoch record, and the comparison of
  histories that refuses an older epoch or a diverged former primary; ``promotion``: a
  standby becoming the primary of the next epoch, and staying one; ``reseed``: a standby's
  old state moved aside until a fresh copy is durable.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.common``,
``service.config``, ``service.meta``, ``service.auth``, ``service.storage``,
``service.index``, ``service.engine``, ``service.archive``.
"""
