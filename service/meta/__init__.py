"""The pure metadata state of the object store and the journal records that change it.

No I/O here: no files, sockets or clocks (timestamps arrive inside records). "Record" here
means a journal record (``records``); the object notifications a client sees are "events"
(``service.events``).

- ``records``: record type names and constructors (plain msgpack-able dicts, the body the
  journal stores of each record).
- ``model``: the immutable values (Bucket, ObjectVersion, ...) and listing pages.
- ``outcome``: ``Outcome``, what applying one record did (incl. payloads it released).
- ``state``: ``MetaState`` and its ``apply(record)``, the one way the state changes, plus
  read helpers; it holds buckets and objects, ``upload_state`` its multipart sessions,
  ``accounts`` its users and keys, ``video_state`` its video jobs and shares,
  ``lifecycle_state`` the buckets' lifecycle rules, ``notification_state`` their webhooks,
  ``refs`` the payload reference counts they share, ``listing`` its paging.
- ``snapshot``: ``freeze`` / ``iter_snapshot`` / ``encode_snapshot`` / ``decode_snapshot``.
- ``identity``: bucket identities, which outlive bucket names (every journal reader's).

Thread-safety: a ``MetaState`` is used on the event-loop thread only; records, outcomes and
frozen images may go to any thread.

May import: nothing of ours (docs/architecture.md, "Layers").
"""

from service.meta import records
from service.meta.frozen import FrozenState
from service.meta.identity import is_bucket_id, legacy_bucket_id
from service.meta.model import (
    NULL_VERSION_ID,
    AccessKey,
    Bucket,
    Counts,
    ObjectPage,
    ObjectVersion,
    PartInfo,
    UploadSession,
    Usage,
    User,
    VersionEntry,
    VersionPage,
    VideoJob,
    VideoShare,
)
from service.meta.outcome import ERROR_CODES, Outcome
from service.meta.snapshot import (
    SnapshotFormatError,
    decode_snapshot,
    encode_snapshot,
    freeze,
    iter_snapshot,
)
from service.meta.state import MetaState

__all__ = [
    "ERROR_CODES",
    "NULL_VERSION_ID",
    "AccessKey",
    "Bucket",
    "Counts",
    "FrozenState",
    "MetaState",
    "ObjectPage",
    "ObjectVersion",
    "Outcome",
    "PartInfo",
    "SnapshotFormatError",
    "UploadSession",
    "Usage",
    "User",
    "VersionEntry",
    "VersionPage",
    "VideoJob",
    "VideoShare",
    "decode_snapshot",
    "encode_snapshot",
    "freeze",
    "is_bucket_id",
    "iter_snapshot",
    "legacy_bucket_id",
    "records",
]
