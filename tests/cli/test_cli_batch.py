"""``svc cp -r``/``mirror``/``mv`` sending small files in batch uploads (docs/batch.md): the
same per-file outcomes as one PUT per file, far fewer requests, and a server without the
batch route still gets everything, one PUT per file."""

from __future__ import annotations

import http.server
import json
import math
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.svckit import Svc, tree_files
from tests.serverproc import ServerProcess

BATCH_ROUTE = "/api/v1/buckets/{bucket}/batch"
PUT_ROUTE = "/api/v1/buckets/{bucket}/objects/{key}"


def requests_count(api: httpx.Client, route: str, method: str) -> int:
    """How many ``method`` requests of ``route`` the server answered (its metrics)."""
    total = 0.0
    for line in api.get("/metrics").text.splitlines():
        found = re.fullmatch(r"service_http_requests_total\{(.*)\}\s+(\S+)", line)
        if found and f'route="{route}"' in found[1] and f'method="{method}"' in found[1]:
            total += float(found[2])
    return int(total)


def small_tree(root: Path, count: int) -> dict[str, bytes]:
    for index in range(count):
        path = root / f"d{index % 7}" / f"fïle {index:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(index % 5000))
    return tree_files(root)


def summary(documents: list[dict[str, object]]) -> dict[str, object]:
    return next(d for d in documents if d.get("status") == "summary")


def test_cp_r_sends_small_files_in_batches_and_reports_each(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "many"
    files = small_tree(source, 300)
    (source / "big.bin").write_bytes(os.urandom(2 * 1024 * 1024))  # over 1 MiB: its own PUT
    files = tree_files(source)
    batches = requests_count(api, BATCH_ROUTE, "POST")
    puts = requests_count(api, PUT_ROUTE, "PUT")
    run = svc("cp", "-r", "--json", str(source) + "/", f"local/{bucket}/up/")
    documents = run.json()
    copied = [d for d in documents if d.get("status") == "copied"]
    assert len(copied) == len(files) and summary(documents)["copied"] == len(files)
    assert {d["target"] for d in copied} == {f"local/{bucket}/up/{name}" for name in files}
    assert all(d["size"] == len(files[d["target"].split("/up/", 1)[1]]) for d in copied)
    assert requests_count(api, BATCH_ROUTE, "POST") - batches == math.ceil(300 / 256)
    assert requests_count(api, PUT_ROUTE, "PUT") - puts == 1
    back = tmp_path / "back"
    svc("cp", "-r", f"local/{bucket}/up/", str(back))
    assert tree_files(back) == files
    again = svc("cp", "-r", "--json", str(source) + "/", f"local/{bucket}/up/").json()
    assert summary(again)["skipped"] == len(files) and summary(again)["copied"] == 0


def test_no_batch_sends_one_put_per_file(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "few"
    files = small_tree(source, 20)
    batches = requests_count(api, BATCH_ROUTE, "POST")
    puts = requests_count(api, PUT_ROUTE, "PUT")
    svc("cp", "-r", "--no-batch", str(source) + "/", f"local/{bucket}/")
    assert requests_count(api, BATCH_ROUTE, "POST") == batches
    assert requests_count(api, PUT_ROUTE, "PUT") - puts == len(files)


def test_files_refused_in_a_batch_fail_alone_with_one_line_each(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "mixed"
    small_tree(source, 10)
    (source / "bad\x01name.txt").write_bytes(b"a control character in the name")
    run = svc("cp", "-r", str(source) + "/", f"local/{bucket}/", ok=False)
    assert run.returncode == 7, str(run)
    errors = [line for line in run.stderr.splitlines() if line.startswith("svc: ")]
    assert len(errors) == 1 and "InvalidKey" in errors[0] and "bad\x01name.txt" in errors[0]
    listed = api.get(f"/buckets/{bucket}/objects").json()["objects"]
    assert len(listed) == 10
    assert api.patch(f"/buckets/{bucket}", json={"quota_bytes": 1}).status_code == 200
    (source / "d0" / "new.txt").write_bytes(b"over the quota")
    documents = svc("cp", "-r", "--json", str(source) + "/", f"local/{bucket}/", ok=False).json()
    failures = {d["subject"]: d["error"]["code"] for d in documents if d["status"] == "error"}
    assert failures == {
        str(source / "bad\x01name.txt"): "InvalidKey",
        str(source / "d0" / "new.txt"): "QuotaExceeded",
    }
    assert summary(documents)["skipped"] == 10


def test_mirror_and_mv_batch_what_differs(
    svc: Svc, api: httpx.Client, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "site"
    files = small_tree(source, 40)
    first = svc("mirror", "--json", str(source), f"local/{bucket}/www").json()
    assert summary(first)["copied"] == len(files)
    changed = sorted(files)[:3]
    for name in changed:
        (source / name).write_bytes(b"changed " + name.encode())
    second = svc("mirror", "--json", str(source), f"local/{bucket}/www").json()
    copied = sorted(
        str(d["target"]).split("/www/", 1)[1] for d in second if d["status"] == "copied"
    )
    assert copied == changed and summary(second)["skipped"] == len(files) - 3
    back = tmp_path / "back"
    svc("mirror", f"local/{bucket}/www", str(back))
    assert tree_files(back) == tree_files(source)
    moving = tmp_path / "moving"
    moved = small_tree(moving, 12)
    svc("mv", "-r", str(moving) + "/", f"local/{bucket}/moved/")
    assert tree_files(moving) == {}
    listed = api.get(f"/buckets/{bucket}/objects", params={"prefix": "moved/"}).json()
    assert len(listed["objects"]) == len(moved)


class _NoBatchProxy(http.server.BaseHTTPRequestHandler):
    """Forwards everything to the server but the batch route, which it answers 404 as a
    proxy or an older server would (a bare body, not the contract's); with
    ``fail_first_member`` it forwards batches too and rewrites each answer's first member into
    a server failure (503), as when the writer stopped mid-batch."""

    protocol_version = "HTTP/1.1"
    upstream = ""
    fail_first_member = False
    """Forward batches, and answer each one's first member as failed by the server (503)."""

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _forward(self) -> None:
        body = self._body()
        batch = self.path.split("?")[0].endswith("/batch")
        if batch and not self.fail_first_member:
            self.send_response(404)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not found")
            return
        skip = {"host", "transfer-encoding", "connection", "content-length"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        answer = httpx.request(
            self.command, self.upstream + self.path, headers=headers, content=body, timeout=30
        )
        content = answer.content
        if batch and answer.status_code == 200:
            content = self._first_member_failed(answer.json())
        self.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in skip | {"content-encoding"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    @staticmethod
    def _first_member_failed(document: dict[str, Any]) -> bytes:
        """The answer as if the writer had stopped before answering for the first member
        (which the server did store: such a member's fate is unknown to the client)."""
        first = document["results"][0]
        message = "the metadata writer stopped before answering; retry"
        error = {"code": "ServiceUnavailable", "message": message, "status": 503}
        document["results"][0] = {"key": first["key"], "error": error}
        document["stored"] -= 1
        document["failed"] += 1
        return json.dumps(document).encode()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


@pytest.fixture(params=[False, True], ids=["no-batch-route", "member-failed"])
def proxy_url(request: pytest.FixtureRequest, cli_server: ServerProcess) -> Iterator[str]:
    attributes = {"upstream": cli_server.url, "fail_first_member": request.param}
    handler = type("Handler", (_NoBatchProxy,), attributes)
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{proxy.server_address[1]}"
    proxy.shutdown()
    proxy.server_close()


@pytest.mark.parametrize(
    ("proxy_url", "batches_sent", "puts_sent"),
    [(False, 0, 30), (True, 1, 1)],
    indirect=["proxy_url"],
    ids=["no-batch-route-gets-one-put-per-file", "member-failed-goes-up-again-as-one-put"],
)
def test_what_the_server_could_not_take_in_a_batch_goes_up_by_put(
    svc: Svc,
    api: httpx.Client,
    bucket: str,
    tmp_path: Path,
    proxy_url: str,
    cli_server: ServerProcess,
    batches_sent: int,
    puts_sent: int,
) -> None:
    """No batch route (a proxy or an older server): every file by PUT, the batches never
    reach the server. A member the server failed (503): that one file again, by PUT."""
    source = tmp_path / "through-proxy"
    files = small_tree(source, 30)
    svc("alias", "set", "proxied", proxy_url, cli_server.access_key, cli_server.secret_key)
    batches = requests_count(api, BATCH_ROUTE, "POST")
    puts = requests_count(api, PUT_ROUTE, "PUT")
    documents = svc("cp", "-r", "--json", str(source) + "/", f"proxied/{bucket}/").json()
    assert summary(documents)["copied"] == len(files) and summary(documents)["failed"] == 0
    assert requests_count(api, BATCH_ROUTE, "POST") - batches == batches_sent
    assert requests_count(api, PUT_ROUTE, "PUT") - puts == puts_sent
    back = tmp_path / "back"
    svc("cp", "-r", f"local/{bucket}/", str(back))
    assert tree_files(back) == files
