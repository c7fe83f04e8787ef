"""``svc cp``/``mv``/``mirror`` against a real server: trees, unicode, resume, removal."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.svckit import Svc, error_line, tree_files
from tests.serverproc import ServerProcess

NAMES = [
    "a.txt",
    "a-b.txt",
    "a0.txt",
    "dir é/ünï/deep/f1.txt",
    "dir é/ünï/日本語.bin",
    "dir é/z.txt",
    "a/b/c/d/e.txt",
    "a/empty.bin",
    "emoji 🎉/x y.txt",
]


def make_tree(root: Path) -> dict[str, bytes]:
    for index, name in enumerate(NAMES):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        size = 0 if name.endswith("empty.bin") else 100 + index * 997
        path.write_bytes(os.urandom(size))
    return tree_files(root)


def keys(api: httpx.Client, bucket: str, prefix: str = "") -> dict[str, int]:
    listed = api.get(f"/buckets/{bucket}/objects", params={"prefix": prefix}).json()["objects"]
    return {o["key"][len(prefix) :]: o["size_bytes"] for o in listed}


def summary(run_json: list[dict[str, object]]) -> dict[str, object]:
    return next(d for d in run_json if d.get("status") == "summary")


def test_cp_r_round_trips_a_unicode_tree_byte_for_byte(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "photos"
    files = make_tree(source)
    up = svc("cp", "-r", "--json", str(source), f"local/{bucket}/backup/").json()
    assert summary(up)["copied"] == len(NAMES)
    assert keys(api, bucket, "backup/photos/") == {n: len(d) for n, d in files.items()}
    down = tmp_path / "restored"
    lines = svc("cp", "-r", f"local/{bucket}/backup/photos/", str(down)).stdout.splitlines()
    assert tree_files(down) == files
    # piped: no progress bar, one line per copied file, then the summary
    assert len(lines) == len(NAMES) + 1 and lines[-1].startswith(f"copied {len(NAMES)} ")
    assert all(line.startswith("`local/") and "` -> `" in line for line in lines[:-1])
    again = svc("cp", "-r", "--json", str(source), f"local/{bucket}/backup/").json()
    assert summary(again)["copied"] == 0 and summary(again)["skipped"] == len(NAMES)


def test_mirror_copies_only_what_differs_and_remove_deletes_extras(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "site"
    files = make_tree(source)
    first = svc("mirror", "--json", str(source), f"local/{bucket}/www").json()
    assert summary(first)["copied"] == len(NAMES)
    (source / "a.txt").write_bytes(b"changed, same size?")
    (source / "a0.txt").write_bytes(os.urandom(100 + 2 * 997))  # same size, new bytes
    (source / "dir é/z.txt").unlink()
    second = svc("mirror", "--json", str(source), f"local/{bucket}/www").json()
    copied = {Path(d["source"]).name for d in second if d.get("status") == "copied"}
    assert copied == {"a.txt", "a0.txt"} and summary(second)["removed"] == 0
    assert "dir é/z.txt" in keys(api, bucket, "www/")
    third = svc("mirror", "--remove", "--json", str(source), f"local/{bucket}/www").json()
    assert [d["target"] for d in third if d.get("status") == "removed"] == [
        f"local/{bucket}/www/dir é/z.txt"
    ]
    assert summary(third)["copied"] == 0
    files = tree_files(source)
    back = tmp_path / "back"
    svc("mirror", f"local/{bucket}/www", str(back))
    assert tree_files(back) == files
    (back / "stray.txt").write_bytes(b"not in the bucket")
    svc("mirror", "--remove", f"local/{bucket}/www", str(back))
    assert tree_files(back) == files


def test_mirror_exclude_skips_and_protects_matching_paths(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    make_tree(source)
    svc("mirror", "--exclude", "*.bin", "--exclude", "a/*", str(source), f"local/{bucket}")
    stored = keys(api, bucket)
    assert not any(k.endswith(".bin") or k.startswith("a/") for k in stored)
    assert "a.txt" in stored and "dir é/z.txt" in stored
    api.put(f"/buckets/{bucket}/objects/keep.bin", content=b"excluded target")
    svc("mirror", "--remove", "--exclude", "*.bin", str(source), f"local/{bucket}")
    assert "keep.bin" in keys(api, bucket)


def test_remote_to_remote_copy_and_mv(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "t"
    files = make_tree(source)
    svc("cp", "-r", str(source) + "/", f"local/{bucket}/one/")
    svc("cp", "-r", f"local/{bucket}/one/", f"local/{bucket}/two/")
    assert keys(api, bucket, "two/") == keys(api, bucket, "one/")
    svc("mv", "-r", f"local/{bucket}/two/", f"local/{bucket}/three/")
    assert keys(api, bucket, "two/") == {} and len(keys(api, bucket, "three/")) == len(files)
    single = tmp_path / "single.txt"
    single.write_bytes(b"just one")
    svc("mv", str(single), f"local/{bucket}/")
    assert not single.exists() and keys(api, bucket)["single.txt"] == 8
    out = tmp_path / "out.txt"
    svc("cp", f"local/{bucket}/single.txt", str(out))
    assert out.read_bytes() == b"just one"


def test_cp_errors_name_the_path(svc: Svc, bucket: str, tmp_path: Path) -> None:
    missing = svc("cp", str(tmp_path / "nope"), f"local/{bucket}/", ok=False)
    assert missing.returncode == 3 and "No such file" in error_line(missing)
    (tmp_path / "d").mkdir()
    directory = svc("cp", str(tmp_path / "d"), f"local/{bucket}/", ok=False)
    assert directory.returncode == 2 and "use -r" in error_line(directory)
    local = svc("cp", str(tmp_path / "d"), str(tmp_path / "e"), ok=False)
    assert local.returncode == 2 and "both paths are local" in error_line(local)
    nobucket = svc("cp", "-r", str(tmp_path / "d"), "local/no-such-bucket-here/", ok=False)
    assert nobucket.returncode == 3 and "NoSuchBucket" in error_line(nobucket)
    assert error_line(nobucket).startswith("svc: local/no-such-bucket-here: NoSuchBucket")
    (tmp_path / "f.txt").write_bytes(b"f")
    into = svc("cp", str(tmp_path / "f.txt"), "local/no-such-bucket-here/", ok=False)
    assert error_line(into).startswith("svc: local/no-such-bucket-here/f.txt: NoSuchBucket")
    gone = svc("cp", f"local/{bucket}/no-such-key.txt", str(tmp_path), ok=False)
    assert gone.returncode == 3
    assert error_line(gone) == (
        f"svc: local/{bucket}/no-such-key.txt: NoSuchKey: "
        f"no object 'no-such-key.txt' in bucket '{bucket}'"
    )
    assert not (tmp_path / "no-such-key.txt").exists()


def test_an_unreadable_file_fails_alone_with_exit_7(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "mixed"
    make_tree(source)
    locked = source / "a.txt"
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("this user reads files of any mode (root); see the link-loop test")
        run = svc("cp", "-r", str(source) + "/", f"local/{bucket}/", ok=False)
        assert run.returncode == 7 and "a.txt" in error_line(run)
        assert len(keys(api, bucket)) == len(NAMES) - 1
    finally:
        locked.chmod(0o644)


def test_a_file_no_user_can_read_fails_alone_with_exit_7(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    """A link to itself cannot be opened even by root (ELOOP): the same failure as a file
    of mode 0, on every machine."""
    source = tmp_path / "looped"
    make_tree(source)
    looped = source / "a.txt"
    looped.unlink()
    looped.symlink_to("a.txt")
    run = svc("cp", "-r", str(source) + "/", f"local/{bucket}/", ok=False)
    assert run.returncode == 7 and "a.txt" in error_line(run)
    assert len(keys(api, bucket)) == len(NAMES) - 1


def test_an_interrupted_cp_of_a_large_file_resumes_from_its_stored_parts(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path, cli_server: ServerProcess
) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(48 * 1024 * 1024))
    flags = ["--multipart-threshold", "1MiB", "--part-size", "1MiB", "--parts", "1"]
    target = f"local/{bucket}/big.bin"
    copy = svc.popen("cp", *flags, str(big), target)
    states = svc.home / ".config" / "svc" / "uploads"
    upload_id, stored = None, 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and stored < 4:
        time.sleep(0.05)
        found = list(states.glob("*.json")) if states.exists() else []
        if found:
            upload_id = json.loads(found[0].read_text())["upload_id"]
            stored = len(api.get(f"/multipart/{upload_id}").json().get("parts", []))
    copy.send_signal(signal.SIGKILL)
    copy.wait()
    assert upload_id is not None and stored >= 4
    assert not keys(api, bucket), "the kill came too late: the upload had completed"
    # A part whose body was already sent may still be committed after the kill: wait until the
    # server's count of stored parts stops moving before taking it.
    before = -1
    for _ in range(40):
        now = len(api.get(f"/multipart/{upload_id}").json()["parts"])
        if now == before:
            break
        before = now
        time.sleep(0.25)
    resumed = svc("cp", "--json", *flags, str(big), target).json()
    copied = next(d for d in resumed if d.get("status") == "copied")
    assert copied["upload_id"] == upload_id and copied["parts_already_stored"] == before
    assert svc.bytes_of("cat", target) == big.read_bytes()
    assert not list(states.glob("*.json"))  # finished: nothing left to resume
    assert api.get(f"/multipart/{upload_id}").status_code == 404
    again = svc("cp", "--json", *flags, str(big), target).json()
    assert summary(again)["skipped"] == 1


def test_a_large_file_goes_up_in_parts_of_at_least_32_mib_by_default(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    """Fewer, larger parts than the server's 8 MiB advice: each part costs a durable write."""
    data = os.urandom(3 * 1024 * 1024 + 5)
    (tmp_path / "mid.bin").write_bytes(data)
    run = svc(
        "cp",
        "--json",
        "--multipart-threshold",
        "1MiB",
        str(tmp_path / "mid.bin"),
        f"local/{bucket}/",
    )
    copied = next(d for d in run.json() if d.get("status") == "copied")
    assert copied["part_size"] == 32 * 1024 * 1024 and copied["parts_already_stored"] == 0
    assert keys(api, bucket) == {"mid.bin": len(data)}
    assert svc.bytes_of("cat", f"local/{bucket}/mid.bin") == data
