"""The scale bench's objects: their bucket, keys and ``ObjectStored`` fields.

Shared by ``bench.scale_bench`` (this tree's populate) and ``bench/scale_anchor_populate.py``
(the in-memory design's, run with only that tree on the path): so this module imports
nothing but the standard library.
"""

from __future__ import annotations

from typing import Any

BUCKET = "scale"
BUCKET_OWNER = "u_bench"
CONCURRENT_COMMITS = 2048
"""Committers each awaiting their next commit as soon as the last one returned."""
POPULATE_SETTINGS: dict[str, Any] = {
    "durability": "balanced",
    "gc_interval": 1e9,
    "snapshot_interval": 1e9,
    "snapshot_every": 10**9,
}
"""The populate's engine settings: balanced, no GC pass and no snapshot of its own accord."""


def object_key(index: int) -> str:
    return f"d{index // 1000:05d}/f{index % 1000:03d}.jpg"


def bucket_fields() -> dict[str, Any]:
    """The bucket's ``BucketCreated`` fields that both designs know."""
    return {
        "name": BUCKET,
        "owner": BUCKET_OWNER,
        "quota_bytes": None,
        "versioning_enabled": False,
        "tags": {},
        "at": 1,
    }


def object_fields(index: int) -> dict[str, Any]:
    """Object ``index``'s ``ObjectStored`` fields (4 KiB; its payload id names no file)."""
    return {
        "bucket": BUCKET,
        "key": object_key(index),
        "payload_id": f"{index:032x}",
        "size": 4096,
        "content_type": "image/jpeg",
        "sha256": f"{index:064x}",
        "custom_metadata": {},
        "version_token": f"v{index}",
        "if_none_match": False,
        "if_match": None,
        "at": 1_790_000_000_000 + index,
    }
