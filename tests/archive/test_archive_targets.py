"""``ArchiveTarget.stream_many``: a restore's batch of payloads from either kind of target.

rclone's batch is one ``rclone copy`` into a scratch directory (two rclone processes per file
made a restore of many payloads take hours); each file then streams from there, a name the
archive lacks raises when it is read, and the scratch directory is gone afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.archive.targets import ArchiveError
from tests.archive.kit import target_for


@pytest.mark.parametrize("kind", ["directory", "rclone"])
def test_a_batch_streams_each_file_in_order_and_names_the_missing_one(
    kind: str, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    files = {f"payloads/{n:02x}/p{n}": bytes([n]) * (70_000 * n + 1) for n in range(1, 4)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    target = target_for(kind, root)
    names = [*files, "payloads/ff/missing"]
    scratch = tmp_path / "scratch"
    seen: dict[str, bytes] = {}
    missing: list[str] = []
    for name, chunks in target.stream_many(names, str(scratch)):
        try:
            seen[name] = b"".join(chunks)
        except ArchiveError as exc:
            assert "payloads/ff/missing" in str(exc)
            missing.append(name)
    assert list(seen) == list(files) and seen == files
    assert missing == ["payloads/ff/missing"]
    assert not scratch.exists()
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == ["p1", "p2", "p3"]  # kept
