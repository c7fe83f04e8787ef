"""Payload files: staging, promotion, reads, joins and garbage collection.

``PayloadStore`` (blocking, thread-safe) owns every payload file under the data root;
``StagingUpload`` streams a request body into it from the event loop. Nothing else in the
service touches payload files.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``.
"""

from service.storage.cache import PayloadCache
from service.storage.integrity import INTEGRITY_CRASH_POINTS, PayloadIntegrity
from service.storage.layout import is_valid_payload_id
from service.storage.payloads import STORAGE_CRASH_POINTS, DigestMismatch, GcResult, PayloadStore
from service.storage.pipeline import StagingUpload, run_blocking
from service.storage.staging import StagedPayload, StagingFile

__all__ = [
    "INTEGRITY_CRASH_POINTS",
    "STORAGE_CRASH_POINTS",
    "DigestMismatch",
    "GcResult",
    "PayloadCache",
    "PayloadIntegrity",
    "PayloadStore",
    "StagedPayload",
    "StagingFile",
    "StagingUpload",
    "is_valid_payload_id",
    "run_blocking",
]
