"""Hostile batch bodies against a real server, with one serving process and with two: what
issue 23's attacker sent (a 2 KiB sparse member storing 1 GiB, a pax size that never ends,
malformed shapes that answered 500, digits of other scripts read as numbers) and the
``prefix`` rules.

Each shape of ``tests.http.tarkit.ATTACKS`` either fails as a whole (400, nothing stored)
or is answered member by member (a refused member stores nothing, the next one is stored).
Declared sizes meet the quota before any byte is staged: a member the quota refuses never
reaches the disk, which the tests watch while its bytes stream in.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.http.tarkit import ATTACKS, END, Attack, header, member, pad, pax
from tests.http.test_batch import keys_of, post_batch
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

_names = itertools.count()
QUOTA = 1024 * 1024


@pytest.fixture(scope="module", params=["1", "2"], ids=["one-process", "two-processes"])
def attacked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("attacked") / "data",
        env_overrides={"SERVICE_WORKERS": request.param},
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def api(attacked: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=attacked.api, auth=attacked.auth, timeout=20.0) as client:
        yield client


@pytest.fixture
def bucket(api: httpx.Client) -> str:
    name = f"attack-{next(_names)}"
    created = api.post("/buckets", json={"name": name, "quota_bytes": QUOTA})
    assert created.status_code == 201, created.text
    return name


def stored_bytes(server: ServerProcess) -> int:
    """Bytes in payload and staging files: what the batch has put on the disk."""
    total = 0
    for directory in ("payloads", "staging"):
        for path in (server.data_dir / directory).rglob("*"):
            try:
                total += path.stat().st_size if path.is_file() else 0
            except FileNotFoundError:
                continue  # removed while walking
    return total


def payload_names(server: ServerProcess) -> set[str]:
    return {p.name for p in (server.data_dir / "payloads").rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_shape_gets_its_answer_and_nothing_else_is_kept(
    api: httpx.Client, bucket: str, attacked: ServerProcess, name: str
) -> None:
    attack: Attack = ATTACKS[name]
    before = payload_names(attacked)
    answer = post_batch(api, bucket, attack.body)
    if attack.whole is not None:
        assert_error(answer, 400, attack.whole)
        assert attack.message in answer.json()["error"]["message"]
        assert keys_of(api, bucket) == []
        assert payload_names(attacked) == before
        return
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    got = [(item["key"], item["error"]["code"] if "error" in item else None) for item in results]
    assert got == list(attack.members)
    stored = [key for key, code in attack.members if code is None]
    assert sorted(keys_of(api, bucket)) == sorted(stored)
    assert len(payload_names(attacked) - before) == len(stored)
    usage = api.get(f"/buckets/{bucket}").json()["usage"]
    assert usage["size_bytes"] == sum(item.get("size_bytes", 0) for item in results)


def test_a_pax_size_past_any_body_ends_at_once(
    api: httpx.Client, bucket: str, attacked: ServerProcess
) -> None:
    """A valid 18-digit size that the quota refuses: its data is skipped as the body
    delivers it, so the body's end (long before 10^17 bytes) is a 400 at once, not a
    thread seeking forever."""
    body = pax({"size": "1" + "0" * 17}) + member("endless", b"x" * 3000) + END
    started = time.monotonic()
    answer = post_batch(api, bucket, body)
    assert_error(answer, 400, "InvalidArgument")
    assert time.monotonic() - started < 15
    assert keys_of(api, bucket) == []
    # and the server is not spinning on it: the next batch is answered as usual
    again = post_batch(api, bucket, member("next", b"n") + END)
    assert again.status_code == 200 and again.json()["stored"] == 1, again.text


def test_a_declared_size_over_the_quota_is_refused_before_its_digest(
    api: httpx.Client, bucket: str
) -> None:
    """Over the quota with a wrong SHA-256: refused for the quota, since its bytes were
    never staged (checking the digest would have meant storing them)."""
    data = b"q" * (QUOTA + 1)
    body = pax({"SERVICE.sha256": "0" * 64}) + member("over", data) + member("fits", b"small") + END
    answer = post_batch(api, bucket, body)
    assert answer.status_code == 200, answer.text
    codes = [item.get("error", {}).get("code") for item in answer.json()["results"]]
    assert codes == ["QuotaExceeded", None]


def test_members_of_one_batch_share_the_quota_net_of_what_they_replace(
    api: httpx.Client, bucket: str
) -> None:
    third = QUOTA // 3
    existing = api.put(f"/buckets/{bucket}/objects/k", content=b"e" * third)
    assert existing.status_code == 200
    body = (
        member("k", b"1" * (third + 10))  # replaces the stored k: net +10
        + member("k", b"2" * (third + 20))  # replaces the k just before it: net +10
        + member("a", b"a" * third)
        + member("b", b"b" * third)  # past the quota: k (third+20) + a + b > QUOTA
        + member("c", b"c" * 100)
        + END
    )
    answer = post_batch(api, bucket, body)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    codes = [item.get("error", {}).get("code") for item in results]
    assert codes == [None, None, None, "QuotaExceeded", None]
    assert api.get(f"/buckets/{bucket}/objects/k").content == b"2" * (third + 20)
    usage = api.get(f"/buckets/{bucket}").json()["usage"]
    assert usage == {"object_count": 3, "size_bytes": third + 20 + third + 100}


def test_a_member_over_the_quota_never_reaches_the_disk_while_it_streams(
    attacked: ServerProcess, bucket: str
) -> None:
    """32 MiB declared against a 1 MiB quota, sent slowly: half-way, the disk holds none
    of it (the old reader staged it all and refused it afterwards)."""
    declared = 32 * 1024 * 1024
    sent_half = threading.Event()
    resume = threading.Event()

    def body() -> Iterator[bytes]:
        yield header("flood", size=declared)
        piece = b"f" * (1024 * 1024)
        for number in range(declared // len(piece)):
            if number == declared // len(piece) // 2:
                sent_half.set()
                resume.wait(30)
            yield piece
        yield member("small", b"kept") + END

    before = stored_bytes(attacked)
    answers: list[httpx.Response] = []

    def send() -> None:
        with httpx.Client(base_url=attacked.api, auth=attacked.auth, timeout=60) as client:
            answers.append(
                client.post(
                    f"/buckets/{bucket}/batch",
                    content=body(),
                    headers={"Content-Type": "application/x-tar"},
                )
            )

    sender = threading.Thread(target=send)
    sender.start()
    try:
        assert sent_half.wait(30)
        time.sleep(1.0)  # the server reads what was sent
        assert stored_bytes(attacked) - before < QUOTA
    finally:
        resume.set()
        sender.join(60)
    (answer,) = answers
    assert answer.status_code == 200, answer.text
    codes = [item.get("error", {}).get("code") for item in answer.json()["results"]]
    assert codes == ["QuotaExceeded", None]


def test_a_body_that_stalls_is_cut_within_the_idle_timeout_and_leaves_nothing(
    server_factory: object,
) -> None:
    server: ServerProcess = server_factory(SERVICE_IDLE_TIMEOUT="2")  # type: ignore[operator]
    with server.client() as api:
        assert api.post("/buckets", json={"name": "stall"}).status_code == 201
        before = payload_names(server)
        credentials = base64.b64encode(":".join(server.auth).encode()).decode()
        start = (
            "POST /api/v1/buckets/stall/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Basic {credentials}\r\nContent-Type: application/x-tar\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        first = member("whole", b"w" * 5000) + header("stalled", size=1 << 20) + b"s" * 1000
        with socket.create_connection(("127.0.0.1", server.port)) as connection:
            connection.sendall(start + b"%x\r\n" % len(first) + first + b"\r\n")
            connection.settimeout(20)
            started = time.monotonic()
            received = b""
            while chunk := connection.recv(65536):
                received += chunk
            waited = time.monotonic() - started
        assert waited < 12, waited  # cut by the upload watchdog, not left open
        deadline = time.monotonic() + 10
        while payload_names(server) != before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert payload_names(server) == before
        assert keys_of(api, "stall") == []


# -- prefix ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    ["a\x01b/", "\tp/", "p/\n", "p\r/", "\x1f", "x\x7f", "x\u0085/", "a" * 1025],
    ids=["soh", "leading-tab", "trailing-lf", "cr", "unit-separator", "del", "c1", "too-long"],
)
def test_a_prefix_with_control_characters_is_invalid_key_never_rewritten(
    api: httpx.Client, bucket: str, prefix: str
) -> None:
    answer = post_batch(api, bucket, member("f", b"x") + END, prefix=prefix)
    assert_error(answer, 400, "InvalidKey")
    assert keys_of(api, bucket) == []


def test_a_prefix_that_is_not_utf8_is_invalid_key(
    api: httpx.Client, bucket: str, attacked: ServerProcess
) -> None:
    answer = api.post(
        f"{attacked.api}/buckets/{bucket}/batch?prefix=%ff%fe",
        content=member("f", b"x") + END,
        headers={"Content-Type": "application/x-tar"},
    )
    assert_error(answer, 400, "InvalidKey")
    assert keys_of(api, bucket) == []


def test_a_prefix_keeps_its_spaces(api: httpx.Client, bucket: str) -> None:
    answer = post_batch(api, bucket, member("f", b"x") + END, prefix=" spaced /")
    assert answer.status_code == 200, answer.text
    assert keys_of(api, bucket) == [" spaced /f"]


def test_prefix_plus_name_follows_the_key_rules_member_by_member(
    api: httpx.Client, bucket: str
) -> None:
    body = member("a" * 90, b"long") + member("ok", b"fine") + END
    answer = post_batch(api, bucket, body, prefix="p" * 950)
    assert answer.status_code == 200, answer.text
    codes = [item.get("error", {}).get("code") for item in answer.json()["results"]]
    assert codes == ["InvalidKey", None]


def test_what_svc_and_gnu_tar_write_is_still_read(api: httpx.Client, bucket: str) -> None:
    """Old-style archives: a v7 header with a trailing slash directory, numbers written
    with leading spaces (old tar), the ustar prefix field and GNU base-256 sizes."""
    data = b"v" * 700
    body = (
        header("old-dir/", typeflag=b"\x00", magic=bytes(8))
        + header("spaced", size=b"     1274 \x00", mode=b"  644 \x00")
        + pad(data)
        + member("in-prefix.txt", b"p", prefix=b"deep/er")
        + member(
            "base256",
            b"b" * 300,
            size=bytes([0x80]) + (300).to_bytes(11, "big"),
            magic=b"ustar  \x00",
        )
        + END
    )
    answer = post_batch(api, bucket, body)
    assert answer.status_code == 200, answer.text
    assert [item["key"] for item in answer.json()["results"]] == [
        "spaced",
        "deep/er/in-prefix.txt",
        "base256",
    ]
    assert api.get(f"/buckets/{bucket}/objects/spaced").content == data
    got = api.get(f"/buckets/{bucket}/objects/base256").content
    assert hashlib.sha256(got).digest() == hashlib.sha256(b"b" * 300).digest()


def test_nothing_of_the_server_went_wrong(attacked: ServerProcess) -> None:
    """Last in the module: no traceback in the server's log for any shape above."""
    logs = attacked.logs()
    assert "Traceback" not in logs
    assert "status=500" not in logs
