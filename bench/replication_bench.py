"""What a standby costs and how fast it copies (issue 25): lag, sync and async beside no
standby, bootstrap beside ``cp -a``, restore beside a copy of the same archive; all in one
run, interleaved A B A B, medians reported.

Servers, all strict on this machine's default processes:

- three primaries under load: ``none`` (no standby), ``async`` and ``sync``
  (``SERVICE_REPLICATION=sync``, its timeout raised so a big body is never refused), each of
  the last two followed by its own standby;
- a ``source`` primary with an archive (``SERVICE_ARCHIVE``), populated with big and small
  objects, that fresh standbys bootstrap from and whose archive is restored.

Figures:

- the 4 KiB PUT load (the server bench's, ``bench.server_rig``) on each of the three primaries:
  requests/s and the primary's CPU µs per request, sync and async each beside ``none``
  (target: sync >= 0.7x without a standby);
- lag under that load: while it runs on the ``async`` primary, a probe PUTs an object every
  ``PROBE_EVERY_SECONDS`` and a poller times each from its acknowledgement on the primary to
  the first poll (every ``PROBE_POLL_SECONDS``) that finds it on the standby, the load's tail
  included: p50 and p99 over every probe of every round (target: p99 < 1 s);
- one big PUT (``profile.big_bytes``: 1 GiB in the full profile) on each primary, MB/s;
- bootstrap: a fresh standby of ``source`` (a new data dir each round, so its writes go to
  fresh blocks), MB/s of the source's data dir from the standby's start until it caught up
  (the signing secret, the newest snapshot and its payloads, then the records after that
  snapshot and their payloads, every one verified and fsynced), beside ``cp -a`` of the same
  data dir to a new directory and a ``sync -f`` (target >= 0.8x); the bootstrap proper (its
  log lines) is in the notes;
- restore: ``python -m service restore`` of the source's archive into a new data dir (the
  whole process, start included) beside ``cp -a`` of the same archive and a ``sync -f``;
- promotion: each bootstrapped standby, once caught up, is promoted; the time from the request
  to the first PUT it accepts, median over the rounds (target < 2 s).

Thread-safety: a script; the lag probe runs on its own thread during a load.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from bench import FULL, Profile, Row, compare, make_data_file, missing_row, scratch_dir
from bench.loadgen import LoadSpec
from bench.replication_rig import (
    LAG_LIMIT_SECONDS,
    LOADED,
    PROBE_POLL_SECONDS,
    SMALL_BYTES,
    Bootstraps,
    archived,
    copy_tree,
    env,
    lag_case,
    pairs,
    percentile,
    populate,
    restore,
    start,
    tree_bytes,
    wait_for,
)
from bench.server_rig import (
    cpu_per_request,
    interleaved_loads,
    load_notes,
    object_path,
    on_server,
    put_from_file,
    rates,
    size_label,
)
from tests.serverproc import ServerProcess

SYNC_TARGET = 0.7
BOOTSTRAP_TARGET = 0.8


def run(profile: Profile = FULL) -> list[Row]:
    connections = profile.small_connections
    put = LoadSpec(
        port=0,
        path="",
        method="PUT",
        body_bytes=SMALL_BYTES,
        unique_paths=True,
        connections=connections,
        seconds=profile.load_seconds,
    )
    with scratch_dir("replication-") as directory, ExitStack() as stack:
        big = make_data_file(os.path.join(directory, "big.bin"), profile.big_bytes)
        big_fd = os.open(big, os.O_RDONLY)
        stack.callback(os.close, big_fd)
        servers = stack.enter_context(pairs(directory))
        source = ServerProcess(
            Path(directory) / "source" / "data",
            env_overrides=env(SERVICE_ARCHIVE=os.path.join(directory, "archive")),
        )
        stack.callback(source.stop)
        start(source)
        written = populate(source, profile, directory)
        wait_for("the archive to catch up", lambda: archived(source))
        source_dir = str(source.data_dir)
        archive = os.path.join(directory, "archive")

        loads = {name: on_server(put, servers[name], object_path(f"put-{name}")) for name in LOADED}
        lag, lags = lag_case(profile, put, servers["async"], servers["async standby"])
        bigs: dict[str, list[float]] = {name: [] for name in LOADED}

        def big_put(name: str) -> Callable[[], float]:
            def case() -> float:
                key = f"big-{name}-{len(bigs[name])}"
                seconds = put_from_file(servers[name], key, big_fd, [(0, profile.big_bytes)])
                bigs[name].append(profile.big_bytes / seconds / 1e6)
                return bigs[name][-1]

            return case

        boots = Bootstraps(source, directory)
        copies: list[float] = []
        restores: list[float] = []
        archive_copies: list[float] = []
        counter = iter(range(1_000_000))

        def copy_case() -> float:
            copies.append(copy_tree(source_dir, os.path.join(directory, f"cp-{next(counter)}")))
            return copies[-1]

        def restore_case() -> float:
            target = os.path.join(directory, f"restored-{next(counter)}")
            restores.append(restore(archive, target))
            return restores[-1]

        def archive_copy_case() -> float:
            target = os.path.join(directory, f"archive-copy-{next(counter)}")
            archive_copies.append(copy_tree(archive, target))
            return archive_copies[-1]

        extra = {
            "lag": lag,
            **{f"big {name}": big_put(name) for name in LOADED},
            "bootstrap": boots.once,
            "cp -a": copy_case,
            "restore": restore_case,
            "cp -a archive": archive_copy_case,
        }
        runs = interleaved_loads(profile, loads, extra)
        data_bytes = tree_bytes(source_dir)
        archive_bytes = tree_bytes(archive)

    rows: list[Row] = []
    for name in ("sync", "async"):
        notes = load_notes({name: runs[name], "none": runs["none"]})
        rows.append(
            compare(
                f"4 KiB PUT, strict, {name} standby, {connections} conns",
                rates(runs[name]),
                "requests/s",
                anchor="the same, no standby",
                anchor_values=rates(runs["none"]),
                target=SYNC_TARGET if name == "sync" else None,
                notes=notes,
            )
        )
        rows.append(
            compare(
                f"CPU per request on the primary, 4 KiB PUT, {name} standby",
                cpu_per_request(runs[name]),
                "µs",
                anchor="the same, no standby",
                anchor_values=cpu_per_request(runs["none"]),
                lower_is_better=True,
            )
        )
    put_p50 = statistics.median(run.result.p50_ms for run in runs["async"]) / 1000
    lag_note = f"{len(lags)} probes, polled every {PROBE_POLL_SECONDS * 1000:g} ms"
    rows.append(
        {
            **compare(
                f"lag p50, acknowledged on the primary -> readable on the standby, "
                f"async, under the 4 KiB PUT load, {connections} conns",
                [percentile(lags, 50)],
                "s",
                anchor="the load's PUT p50 latency on the primary",
                anchor_values=[put_p50],
            ),
            "notes": lag_note,
        }
    )
    p99 = percentile(lags, 99)
    rows.append(
        {
            "measurement": "lag p99, the same",
            "value": p99,
            "unit": "s",
            "anchor": "",
            "anchor_value": None,
            "ratio": None,
            "target": f"< {LAG_LIMIT_SECONDS:g} s",
            "met": "yes" if p99 < LAG_LIMIT_SECONDS else "NO",
            "runs": [percentile(lags, 99)],
            "notes": lag_note,
        }
    )
    label = size_label(profile.big_bytes)
    for name in ("sync", "async"):
        rows.append(
            compare(
                f"{label} PUT, strict, {name} standby",
                bigs[name],
                "MB/s",
                anchor="the same, no standby",
                anchor_values=bigs["none"],
                notes="sync: acknowledged once the standby holds the body, fsynced"
                if name == "sync"
                else "",
            )
        )
    mb = data_bytes / 1e6
    rows.append(
        compare(
            f"bootstrap of a fresh standby, {mb:,.0f} MB data dir ({written / 1e6:,.0f} MB "
            "of objects)",
            [mb / seconds for seconds in boots.walls],
            "MB/s",
            anchor="cp -a of the same data dir + sync -f, to a new directory",
            anchor_values=[mb / seconds for seconds in copies],
            target=BOOTSTRAP_TARGET,
            notes="from the standby's start to caught up (its process start, the snapshot "
            "and its payloads, then the records after it and theirs); of that, the bootstrap "
            f"itself (its log): {statistics.median(boots.proper):.2f} s median",
        )
    )
    amb = archive_bytes / 1e6
    rows.append(
        compare(
            f"restore of the archive ({amb:,.0f} MB), python -m service restore",
            [amb / seconds for seconds in restores],
            "MB/s",
            anchor="cp -a of the same archive + sync -f, to a new directory",
            anchor_values=[amb / seconds for seconds in archive_copies],
            notes="the whole command, its interpreter's start included",
        )
    )
    promotion = statistics.median(boots.promotions)
    rows.append(
        {
            **missing_row(
                "promotion time, request to the first PUT accepted (each bootstrapped standby)",
                "POST /api/v1/replication/promote, then PUTs until one is accepted; async, "
                "the standby idle and caught up",
            ),
            "value": promotion,
            "unit": "s",
            "target": "< 2 s",
            "met": "yes" if promotion < 2 else "NO",
            "runs": boots.promotions,
        }
    )
    return rows
