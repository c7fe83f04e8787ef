"""What applying one event did: ``Outcome``.

``apply`` never raises; a conflicting event (the bucket vanished, a precondition lost a
race) is journaled like any other and answered here as rejected, with a code of the wire
contract the engine can hand to the client unchanged.

``released_payloads`` lists payload ids that nothing references any more after the event:
the engine deletes those files once the event is durable. A payload is released exactly
once: when the last reference to it goes, or, for an event carrying a payload that was
rejected, at once.

Thread-safety: immutable values, safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.meta.model import (
    AccessKey,
    Bucket,
    ObjectVersion,
    PartInfo,
    UploadSession,
    User,
    VideoJob,
    VideoShare,
)

Record = (
    Bucket
    | ObjectVersion
    | UploadSession
    | PartInfo
    | User
    | AccessKey
    | VideoJob
    | VideoShare
    | None
)

ERROR_CODES = frozenset(
    {
        "NoSuchBucket",
        "BucketAlreadyExists",
        "BucketNotEmpty",
        "PreconditionFailed",
        "QuotaExceeded",
        "NoSuchKey",
        "NoSuchVersion",
        "NoSuchUpload",
        "InvalidPart",
        "InvalidPartOrder",
        "InvalidPartNumber",
        "UserAlreadyExists",
        "NoSuchUser",
        "NoSuchAccessKey",
        "NoSuchJob",
        "NoSuchShare",
        "InvalidState",
        "ObjectLocked",
        "InvalidArgument",
        "MethodNotAllowed",
        "InternalError",
    }
)
"""Every code a rejected outcome may carry; all are codes of the wire contract.

``InternalError`` marks an event that could not be applied at all (unknown type,
malformed fields): a bug or a journal from a newer version, never a client's fault.
"""


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    error_code: str | None = None
    error_message: str | None = None
    value: Record = None
    released_payloads: tuple[str, ...] = ()


def accepted(value: Record, released: list[str] | tuple[str, ...] = ()) -> Outcome:
    return Outcome(ok=True, value=value, released_payloads=tuple(released))


def rejected(code: str, message: str, released: list[str] | tuple[str, ...] = ()) -> Outcome:
    return Outcome(
        ok=False, error_code=code, error_message=message, released_payloads=tuple(released)
    )
