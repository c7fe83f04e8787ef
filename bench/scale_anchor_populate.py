"""Populate a data dir for the scale bench's in-memory design, with that design's own code.

``PYTHONPATH=<the tree at ANCHOR_COMMIT> python bench/scale_anchor_populate.py DATA_DIR N``

Why its own populate: today's snapshots and records carry fields the older tree cannot read
(a bucket's identity, object lock), so the in-memory design is measured on a data dir of the
same N objects (same keys, sizes and bucket) that its own engine committed, not on this
tree's. Run with only that tree on the path: of this tree it imports only
``bench/scale_objects.py`` beside it (the standard library only), and it runs against the
API of ``service.engine`` and ``service.meta.events`` at ``bench.scale_bench.ANCHOR_COMMIT``
(checked by the slow scale smoke test).
"""

from __future__ import annotations

import asyncio
import sys

from scale_objects import (  # bench/, beside
    CONCURRENT_COMMITS,
    POPULATE_SETTINGS,
    bucket_fields,
    object_fields,
)

from service.config import Config
from service.engine import Engine
from service.meta import events


async def populate(data_dir: str, count: int) -> None:
    engine = Engine(Config(data_dir=data_dir, **POPULATE_SETTINGS))
    await engine.start()
    await engine.commit(events.bucket_created(**bucket_fields()))
    numbers = iter(range(count))

    async def committer() -> None:
        for i in numbers:
            await engine.commit(events.object_stored(**object_fields(i)))

    await asyncio.gather(*(committer() for _ in range(CONCURRENT_COMMITS)))
    await engine.snapshot()
    await engine.stop()


if __name__ == "__main__":
    asyncio.run(populate(sys.argv[1], int(sys.argv[2])))
