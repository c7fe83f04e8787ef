"""``svc share``, ``watch``, ``admin`` and ``video`` against a real server."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.cli.svckit import Svc, error_line
from tests.http.videokit import make_clip


def test_share_get_url_works_without_credentials(svc: Svc, api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/docs/report.pdf", content=b"%PDF-1.7 report")
    url = svc("share", "get", "--expire", "10m", f"local/{bucket}/docs/report.pdf").stdout.strip()
    answer = httpx.get(url)  # no credentials at all
    assert answer.status_code == 200 and answer.content == b"%PDF-1.7 report"
    document = svc("share", "get", "--json", f"local/{bucket}/docs/report.pdf").json()[0]
    assert document["method"] == "GET" and document["expires_in"] == 7 * 86400


def test_share_put_url_accepts_an_upload_without_credentials(
    svc: Svc, api: httpx.Client, bucket: str
) -> None:
    url = svc("share", "put", "--expire", "1h", f"local/{bucket}/inbox/up.txt").stdout.strip()
    assert httpx.put(url, content=b"uploaded by a stranger").status_code == 200
    stored = api.get(f"/buckets/{bucket}/objects/inbox/up.txt")
    assert stored.content == b"uploaded by a stranger"


def test_share_refuses_bad_expiries_and_prefixes(svc: Svc, bucket: str) -> None:
    for expire in ("8d", "0", "soon"):
        run = svc("share", "get", "--expire", expire, f"local/{bucket}/k", ok=False)
        assert run.returncode == 2 and error_line(run)
    prefix = svc("share", "get", f"local/{bucket}/", ok=False)
    assert prefix.returncode == 2 and "names no key" in error_line(prefix)


def test_watch_prints_the_buckets_events_as_they_happen(
    svc: Svc, api: httpx.Client, bucket: str
) -> None:
    api.put(f"/buckets/{bucket}/objects/before.txt", content=b"1")
    process = svc.popen(
        "watch", "--json", "--since", "0", f"local/{bucket}", stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        api.put(f"/buckets/{bucket}/objects/after.txt", content=b"22")
        second = json.loads(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(10)
    assert [(e["type"], e["key"]) for e in (first, second)] == [
        ("object.created", "before.txt"),
        ("object.created", "after.txt"),
    ]
    assert second["size_bytes"] == 2 and second["sequence"] > first["sequence"]
    contract = {"event_id", "sequence", "type", "bucket", "key", "version_id", "size_bytes"}
    assert set(first) == contract | {"etag", "time"} and first["time"].endswith("Z")
    missing = svc("watch", "local/no-such-bucket-x", ok=None, timeout=30)
    assert missing.returncode != 0 and error_line(missing)


def test_admin_users_and_keys(svc: Svc, api: httpx.Client) -> None:
    name = f"cli-user-{secrets.token_hex(3)}"
    made = svc("admin", "user", "add", "local", name, "--json", input="pw-" + name + "\n").json()
    user_id = made[0]["user_id"]
    assert made[0]["username"] == name and made[0]["role"] == "user"
    assert name in svc("admin", "user", "ls", "local").stdout
    svc("admin", "user", "disable", "local", user_id)
    assert api.get(f"/users/{user_id}").json()["status"] == "disabled"
    svc("admin", "user", "enable", "local", user_id)
    key = svc("admin", "key", "add", "local", "--user", user_id, "--name", "ci", "--json").json()[0]
    assert key["secret_key"].startswith("sk_")
    with httpx.Client(
        base_url=str(api.base_url), auth=(key["access_key_id"], key["secret_key"])
    ) as c:
        assert c.get("/buckets").status_code == 200
    listed = svc("admin", "key", "ls", "local").stdout
    assert key["access_key_id"] in listed and key["secret_key"] not in listed
    svc("admin", "key", "revoke", "local", key["access_key_id"])
    svc("admin", "key", "rm", "local", key["access_key_id"])
    svc("admin", "user", "rm", "local", user_id)
    gone = svc("admin", "user", "info", "local", user_id, ok=False)
    assert gone.returncode == 3 and "NoSuchUser" in error_line(gone)


def test_admin_bucket_settings(svc: Svc, api: httpx.Client, bucket: str) -> None:
    svc(
        "admin",
        "bucket",
        "set",
        f"local/{bucket}",
        "--quota",
        "1MiB",
        "--versioning",
        "on",
        "--tag",
        "team=web",
    )
    info = svc("admin", "bucket", "info", "--json", f"local/{bucket}").json()[0]
    assert info["quota_bytes"] == 1024 * 1024 and info["versioning_enabled"] is True
    assert info["tags"] == {"team": "web"}
    svc("admin", "bucket", "set", f"local/{bucket}", "--quota", "none")
    assert api.get(f"/buckets/{bucket}").json()["quota_bytes"] is None
    nothing = svc("admin", "bucket", "set", f"local/{bucket}", ok=False)
    assert nothing.returncode == 2


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clip") / "clip.mp4", seconds=2, audio=False)


def test_video_thumbnail_package_and_share(
    svc: Svc, api: httpx.Client, bucket: str, clip: bytes, tmp_path: Path
) -> None:
    api.put(f"/buckets/{bucket}/objects/talk.mp4", content=clip)
    thumb = svc("video", "thumbnail", "--json", "--width", "64", f"local/{bucket}/talk.mp4").json()
    assert thumb[0]["content_type"].startswith("image/") and thumb[0]["size_bytes"] > 0
    job = svc(
        "video",
        "package",
        "--format",
        "hls",
        "--wait",
        "--json",
        f"local/{bucket}/talk.mp4",
        timeout=180,
    ).json()[0]
    assert job["status"] == "completed" and "hls" in job["outputs"]
    status = svc("video", "status", "local", job["job_id"], "--json").json()[0]
    assert status["job_id"] == job["job_id"]
    assert status["attempts"] == 1 and status["worker"] is None  # packaged by the server
    assert "\tattempt 1\t" in svc("video", "status", "local", job["job_id"]).stdout
    assert job["job_id"] in svc("video", "jobs", f"local/{bucket}").stdout
    share = svc("video", "share", "local", job["job_id"], "--json").json()[0]
    playlist = httpx.get(share["hls_url"])
    assert playlist.status_code == 200 and playlist.text.startswith("#EXTM3U")
