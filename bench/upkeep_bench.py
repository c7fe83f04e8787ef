"""Upkeep benchmark (issue 17): webhook delivery, the scrub's pace, GETs during a scrub.

On one strict server (bucket ``bench``):

- webhook delivery: a webhook on the bucket posts to a local receiver (Python's threading
  HTTP server, acknowledging with 204) while a 4 KiB PUT load runs; the figure is events
  delivered per second from the first PUT until the receiver has every event, beside the PUT
  rate that produced them (no target: the ratio says whether delivery keeps up);
- the scrub's rate in MB/s (10^6 bytes) over a pass of ``scrub_bytes`` in 8 MiB objects,
  beside its configured pace ``SERVICE_SCRUB_RATE_MBPS`` (target: at most 1.05x, it never
  takes more disk than it is allowed);
- the 4 KiB GET rate while a scrub pass runs beside the rate without one, interleaved
  (target >= 0.9x).

Thread-safety: a script; the receiver serves on its own threads.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench import FULL, MIB, Profile, Row, compare, interleave, scratch_dir
from bench.loadgen import LoadSpec, run_load
from bench.server_bench import BUCKET, SMALL_BYTES, auth_headers, object_path
from tests.events.receiver import Receiver
from tests.serverproc import ServerProcess

OBJECT_BYTES = 8 * MIB
WEBHOOK_SECRET = "bench-webhook-secret"


def pace_mbps(profile: Profile) -> float:
    """The scrub pace: the default 50 MB/s, less for the smoke test's tiny data."""
    return 4.0 if profile.name == "smoke" else 50.0


def scrub_bytes(profile: Profile) -> int:
    """Enough payload for a pass to outlast one GET load (plus start-up slack)."""
    need = pace_mbps(profile) * 1e6 * (profile.load_seconds + 1)
    return max(OBJECT_BYTES, int(need // OBJECT_BYTES + 1) * OBJECT_BYTES)


def _wait_scrub_idle(client: httpx.Client, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while (doc := client.get("/system/scrub").json())["state"] == "running":
        if time.monotonic() > deadline:
            raise RuntimeError("the scrub pass did not finish in time")
        time.sleep(0.05)
    return doc  # type: ignore[no-any-return]


def webhook_delivery(server: ServerProcess, profile: Profile) -> Row:
    """Deliveries per second beside the PUT rate that produced the events."""
    with Receiver() as receiver, server.client() as client:
        hook = {"id": "bench", "url": receiver.url, "secret": WEBHOOK_SECRET}
        client.put(f"/buckets/{BUCKET}/notifications", json={"webhooks": [hook]})
        spec = LoadSpec(
            port=server.port,
            path=object_path("hook"),
            method="PUT",
            headers=auth_headers(server),
            body_bytes=SMALL_BYTES,
            unique_paths=True,
            connections=profile.small_connections,
            seconds=profile.load_seconds,
        )
        started = time.monotonic()
        result = run_load(spec, profile.load_tool)
        produced = result.requests - result.errors
        deadline = time.monotonic() + 300
        while len(receiver.received()) < produced and time.monotonic() < deadline:
            time.sleep(0.01)
        elapsed = time.monotonic() - started
        delivered = len(receiver.received())
        client.delete(f"/buckets/{BUCKET}/notifications")
    return compare(
        "webhook deliveries, 4 KiB PUT load",
        [delivered / elapsed],
        "events/s",
        anchor="acknowledged PUT rate producing them",
        anchor_values=[produced / result.seconds if result.seconds else 0.0],
        notes=f"{delivered} of {produced} events delivered in {elapsed:.1f} s "
        f"({result.tool}, {profile.small_connections} conns"
        + (f"; {result.errors} PUTs refused, no event" if result.errors else "")
        + ")",
    )


def scrub_rows(server: ServerProcess, profile: Profile) -> list[Row]:
    """The scrub's measured rate against its pace; GET rate with and without a pass."""
    total = scrub_bytes(profile)
    block = os.urandom(OBJECT_BYTES)
    with server.client() as client:
        for index in range(total // OBJECT_BYTES):
            body = index.to_bytes(8, "big") + block[8:]
            client.put(f"/buckets/{BUCKET}/objects/scrub-{index}", content=body)
        client.put(f"/buckets/{BUCKET}/objects/small", content=os.urandom(SMALL_BYTES))
        client.post("/system/scrub").raise_for_status()
        started = time.monotonic()
        doc = _wait_scrub_idle(client, total / (pace_mbps(profile) * 1e6) * 3 + 30)
        scrub_rate = int(doc["bytes_checked"]) / (time.monotonic() - started) / 1e6  # type: ignore[call-overload]
        get = LoadSpec(
            port=server.port,
            path=object_path("small"),
            headers=auth_headers(server),
            connections=profile.small_connections,
            seconds=profile.load_seconds,
        )
        overlapped: list[bool] = []

        def plain() -> float:
            _wait_scrub_idle(client, 600)
            return run_load(get, profile.load_tool).requests_per_second

        def during_scrub() -> float:
            _wait_scrub_idle(client, 600)
            client.post("/system/scrub").raise_for_status()
            rate = run_load(get, profile.load_tool).requests_per_second
            overlapped.append(client.get("/system/scrub").json()["state"] == "running")
            return rate

        runs = interleave({"plain": plain, "scrub": during_scrub}, profile.repeats)
    pace = pace_mbps(profile)
    return [
        compare(
            f"scrub pass over {total // MIB} MiB",
            [scrub_rate],
            "MB/s",
            anchor="configured pace",
            anchor_values=[pace],
            target=1.05,
            lower_is_better=True,
            notes=f"SERVICE_SCRUB_RATE_MBPS={pace:g}; data in the page cache",
        ),
        compare(
            f"4 KiB GET during a scrub, {profile.small_connections} conns",
            runs["scrub"],
            "req/s",
            anchor="4 KiB GET, no scrub",
            anchor_values=runs["plain"],
            target=0.9,
            notes=f"scrub still running at the end of each load: {all(overlapped)}",
        ),
    ]


def run(profile: Profile = FULL) -> list[Row]:
    with scratch_dir("upkeep-") as scratch, ExitStack() as stack:
        server = ServerProcess(
            data_dir=Path(scratch) / "data",
            env_overrides={
                "SERVICE_DURABILITY": "strict",
                "SERVICE_SCRUB_RATE_MBPS": str(pace_mbps(profile)),
                "SERVICE_LOG_LEVEL": "warning",
                # One user drives every connection: the per-user slot cap (16) would refuse
                # most PUTs of the load, and a refused PUT makes no event to deliver.
                "SERVICE_MAX_UPLOADS_PER_USER": str(FULL.small_connections),
            },
        )
        stack.callback(server.stop)
        server.start()
        with server.client() as client:
            client.post("/buckets", json={"name": BUCKET}).raise_for_status()
        return [webhook_delivery(server, profile), *scrub_rows(server, profile)]
