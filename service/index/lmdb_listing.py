"""A page of a bucket's objects straight from the LMDB index's cursors.

``service.meta.listing.list_objects`` walks any sorted container through two small views;
over LMDB that cost about 4 us a key: a generator per view, each key decoded to ``str`` to
test its prefix and encoded again to look it up, every version of it decoded. A page of
1,000 keys is the request a listing client makes most, so here the same walk is done in
bytes, where LMDB keeps the keys:

- one cursor over ``visible`` (the keys whose latest version is not a delete marker), from
  the page's start; prefix and delimiter are found in the UTF-8 bytes (a UTF-8 string is
  found in another's bytes exactly where its code points are found in the other's), and a
  key is decoded only when it is returned;
- a key that a delimiter folds into a common prefix ends the cursor's run: the next one
  starts with one seek past everything under that prefix (its bytes' successor), never
  stepping over the keys under it;
- only the latest version of each returned key is decoded and built (a msgpack array of one
  version, the usual case, is decoded whole; a longer one skips the older versions).

The page is the one ``listing.list_objects`` returns (same start after a cursor, same
common prefixes, truncation and ``last_item``); the model-based tests check both against the
naive model at every page size.

Thread-safety: reads only through the read (or open write) transaction it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgpack

from service.meta.listing import resume_point
from service.meta.model import ObjectPage, ObjectVersion

_ONE_VERSION = 0x91
"""msgpack's header of an array of one item: a key with one version."""


def _latest(data: bytes) -> list[Any]:
    """The fields of the last version in a key's msgpack array of versions."""
    if data[0] == _ONE_VERSION:
        fields: list[Any] = msgpack.unpackb(data)[0]
        return fields
    unpacker = msgpack.Unpacker()
    unpacker.feed(data)
    for _ in range(unpacker.read_array_header() - 1):
        unpacker.skip()
    last: list[Any] = unpacker.unpack()
    return last


def _successor(prefix: bytes) -> bytes:
    """The least bytes above every key that starts with ``prefix`` (which ends in a UTF-8
    delimiter, whose last byte is never 0xff)."""
    return prefix[:-1] + bytes((prefix[-1] + 1,))


def list_objects(
    keys_from: Callable[[bytes, bytes], Iterator[bytes]],
    lookup: Callable[[bytes], bytes],
    bucket: str,
    prefix: str,
    delimiter: str | None,
    limit: int,
    start_after: str | None,
) -> ObjectPage:
    """One page of the keys whose latest version is not a delete marker, as
    ``service.meta.listing.list_objects`` pages them. ``keys_from(start, within)`` yields
    the visible ``bucket NUL key`` from ``start`` on while they begin with ``within``, in
    order; ``lookup(full)`` is the stored versions of one of them."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    head = bucket.encode() + b"\0"
    within = head + prefix.encode()
    delim = (delimiter or "").encode()
    skip = len(within)
    objects: list[ObjectVersion] = []
    prefixes: list[str] = []
    last_item: str | None = None
    truncated = False
    bound, inclusive = resume_point(prefix, delimiter or "", start_after)
    start = None if bound is None else head + bound.encode()
    while start is not None:
        jump: bytes | None = None
        for full in keys_from(start, within):
            if not inclusive and full == start:
                continue
            if len(objects) + len(prefixes) >= limit:
                truncated = True
                break
            cut = full.find(delim, skip) if delim else -1
            if cut >= 0:
                common = full[: cut + len(delim)]
                last_item = common[len(head) :].decode()
                prefixes.append(last_item)
                jump = _successor(common)
                break
            key = full[len(head) :].decode()
            objects.append(ObjectVersion(bucket, key, *_latest(lookup(full))))
            last_item = key
        start, inclusive = jump, True
    return ObjectPage(tuple(objects), tuple(prefixes), last_item, truncated)
