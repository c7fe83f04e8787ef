"""Schemathesis hooks for the run (``SCHEMATHESIS_HOOKS``): a serializer for tar bodies.

Schemathesis serializes only the media types it knows; the batch upload takes
``application/x-tar`` (docs/batch.md). A generated binary value is sent as it is (almost never
a valid tar, so 400 InvalidArgument), anything else (negative tests) as its text.
"""

from __future__ import annotations

from typing import Any

import schemathesis


@schemathesis.serializer("application/x-tar")
def tar_body(ctx: Any, value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return str(value).encode("utf-8")
