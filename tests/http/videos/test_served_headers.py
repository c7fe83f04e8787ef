"""Share playback and stored thumbnails are user content: sandboxed and never sniffed.

The DASH manifest is ``application/dash+xml``, an XML type a browser would render, so it is a
download when opened in a tab (players fetch it, which ``Content-Disposition`` does not
affect). The rules themselves: ``tests/http/test_edge_served_content.py``.
"""

from __future__ import annotations

import httpx

from tests.http.videokit import fetch, run_job, share


def assert_sandboxed(headers: httpx.Headers) -> None:
    assert headers.get_list("X-Content-Type-Options") == ["nosniff"]
    assert headers.get_list("Content-Security-Policy") == ["sandbox"]


def test_share_playback_is_sandboxed(api: httpx.Client, bucket: str) -> None:
    job = run_job(api, bucket, formats=["hls", "dash"])
    links = share(api, job["job_id"])
    master = fetch(links["hls_url"])
    assert master.status_code == 200
    assert_sandboxed(master.headers)
    assert "Content-Disposition" not in master.headers
    segment = fetch(links["hls_url"].rsplit("/", 1)[0] + "/stream_0_00000.ts")
    assert segment.status_code == 200
    assert_sandboxed(segment.headers)
    manifest = fetch(links["dash_url"])
    assert manifest.status_code == 200
    assert manifest.headers["Content-Type"].startswith("application/dash+xml")
    assert_sandboxed(manifest.headers)
    assert manifest.headers["Content-Disposition"].startswith("attachment")
    head = httpx.head(links["hls_url"])
    assert_sandboxed(head.headers)
    # Any origin may play a share; the sandbox does not get in a player's way.
    assert master.headers["Access-Control-Allow-Origin"] == "*"


def test_a_stored_thumbnail_is_served_sandboxed(api: httpx.Client, bucket: str) -> None:
    made = api.post(
        "/videos/thumbnails", json={"bucket": bucket, "key": "clip.mp4", "target_key": "t.jpg"}
    )
    assert made.status_code == 201, made.text
    stored = api.get(f"/buckets/{bucket}/objects/t.jpg")
    assert stored.status_code == 200 and stored.headers["Content-Type"] == "image/jpeg"
    assert_sandboxed(stored.headers)
    assert "Content-Disposition" not in stored.headers
