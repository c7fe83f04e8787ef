"""The audit log over HTTP: what is recorded, the fields exactly, the chain and its checks.

Every request that reached authorisation is one record: writes, admin actions and every
refusal kind (401, 403, 423) always, reads only with ``SERVICE_AUDIT_READS=1``. The chain
verifies; a flipped byte is found with its sequence; it stays intact across SIGKILL and
restart, across several serving processes, and across retention (a signed anchor). No
secret, password, token or signature used by a run appears in its audit files.
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.audit.record import GENESIS, canonical
from tests.http.identitykit import create_account, login
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

RECORD_FIELDS = {
    "sequence",
    "time",
    "request_id",
    "principal",
    "source",
    "method",
    "path",
    "bucket",
    "key",
    "version_id",
    "action",
    "status",
    "bytes",
    "prev",
    "hash",
}
RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def audit_records(api: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    """Every record (following the cursor), filtered as asked."""
    records: list[dict[str, Any]] = []
    since = 0
    while True:
        page = api.get("/system/audit", params={"since": since, "limit": 1000, **params})
        assert page.status_code == 200, page.text
        body = page.json()
        records += body["records"]
        if body["next_cursor"] is None:
            return records
        since = int(body["next_cursor"])


def by_request(records: list[dict[str, Any]], response: httpx.Response) -> dict[str, Any]:
    wanted = response.headers["X-Request-Id"]
    found = [record for record in records if record["request_id"] == wanted]
    assert len(found) == 1, (wanted, found)
    return found[0]


def verify(api: httpx.Client) -> dict[str, Any]:
    answer = api.get("/system/audit/verify")
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def segment_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "audit").glob("audit-*.jsonl"))


@pytest.fixture
def reads_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(SERVICE_AUDIT_READS="1")


@pytest.fixture
def reads_api(reads_server: ServerProcess) -> Iterator[httpx.Client]:
    with reads_server.client() as client:
        yield client


# -- what is recorded, and how --------------------------------------------------------------


def test_a_write_is_one_record_with_exactly_the_contracts_fields(
    api: httpx.Client, server: ServerProcess, bucket_name: str
) -> None:
    created = api.post("/buckets", json={"name": bucket_name, "versioning_enabled": True})
    stored = api.put(f"/buckets/{bucket_name}/objects/dir/a%20b.txt", content=b"twelve bytes")
    assert stored.status_code == 200
    creation = by_request(audit_records(api, bucket=bucket_name), created)
    assert (creation["action"], creation["bucket"], creation["key"]) == (
        "bucket:create",
        bucket_name,
        None,
    )
    record = by_request(audit_records(api, bucket=bucket_name), stored)
    assert set(record) == RECORD_FIELDS
    assert record["principal"]["access_key_id"] == server.access_key
    assert set(record["principal"]) == {"user_id", "access_key_id"}
    assert record["principal"]["user_id"].startswith("u_")
    assert record["method"] == "PUT"
    assert record["path"] == f"/api/v1/buckets/{bucket_name}/objects/dir/a%20b.txt"
    assert (record["bucket"], record["key"]) == (bucket_name, "dir/a b.txt")
    assert record["version_id"] == stored.json()["version_id"]
    assert (record["action"], record["status"], record["bytes"]) == ("object:write", 200, 12)
    assert record["source"] == "127.0.0.1"
    assert RFC3339_MS.match(record["time"])
    body = {name: value for name, value in record.items() if name != "hash"}
    assert record["hash"] == hashlib.sha256(canonical(body)).hexdigest()


def test_reads_are_not_recorded_by_default_but_admin_reads_are(
    api: httpx.Client, bucket_name: str
) -> None:
    api.post("/buckets", json={"name": bucket_name})
    api.put(f"/buckets/{bucket_name}/objects/k", content=b"x")
    reads = [
        api.get(f"/buckets/{bucket_name}/objects/k"),
        api.head(f"/buckets/{bucket_name}/objects/k"),
        api.get(f"/buckets/{bucket_name}/objects"),
        api.get(f"/buckets/{bucket_name}"),
    ]
    admin_read = api.get("/users")
    records = audit_records(api)
    ids = {record["request_id"] for record in records}
    assert not ids & {read.headers["X-Request-Id"] for read in reads}
    assert by_request(records, admin_read)["action"] == "user:list"


def test_reads_are_recorded_when_asked(reads_api: httpx.Client, bucket_name: str) -> None:
    reads_api.post("/buckets", json={"name": bucket_name})
    reads_api.put(f"/buckets/{bucket_name}/objects/k", content=b"seven b")
    got = reads_api.get(f"/buckets/{bucket_name}/objects/k")
    head = reads_api.head(f"/buckets/{bucket_name}/objects/k")
    listed = reads_api.get(f"/buckets/{bucket_name}/objects")
    missing = reads_api.get(f"/buckets/{bucket_name}/objects/nope")
    records = audit_records(reads_api)
    assert (by_request(records, got)["action"], by_request(records, got)["bytes"]) == (
        "object:read",
        7,
    )
    assert by_request(records, got)["version_id"] == "null"
    assert (by_request(records, head)["method"], by_request(records, head)["bytes"]) == ("HEAD", 0)
    assert by_request(records, listed)["action"] == "object:list"
    assert by_request(records, listed)["bytes"] == len(listed.content)
    assert by_request(records, missing)["status"] == 404


def test_every_refusal_kind_is_recorded(
    api: httpx.Client, server: ServerProcess, bucket_name: str
) -> None:
    api.post("/buckets", json={"name": bucket_name, "object_lock_enabled": True})
    version = api.put(f"/buckets/{bucket_name}/objects/k", content=b"x").json()["version_id"]
    api.put(
        f"/buckets/{bucket_name}/objects/k/legal-hold",
        params={"version_id": version},
        json={"status": "on"},
    )
    stranger = create_account(api, prefix="stranger")
    anonymous = httpx.get(f"{server.api}/buckets/{bucket_name}/objects/k")
    unknown_key = httpx.get(f"{server.api}/buckets", auth=("bk_unknownkey", "sk_wrongsecret1"))
    wrong_secret = httpx.get(f"{server.api}/buckets", auth=(server.access_key, "sk_not-the-secret"))
    denied = httpx.delete(f"{server.api}/buckets/{bucket_name}", auth=stranger.auth)
    bad_signature = httpx.get(
        f"{server.api}/buckets/{bucket_name}/objects/k",
        params={"X-Expires": "9999999999", "X-Credential": server.access_key, "X-Signature": "00"},
    )
    locked = api.delete(f"/buckets/{bucket_name}/objects/k", params={"version_id": version})
    api.patch(f"/users/{stranger.user_id}", json={"status": "disabled"})
    disabled = httpx.get(f"{server.api}/buckets", auth=stranger.auth)
    expected = [
        (anonymous, 401, "object:read", {"user_id": None}),
        (unknown_key, 401, "bucket:list", {"user_id": None, "access_key_id": "bk_unknownkey"}),
        (wrong_secret, 401, "bucket:list", None),
        (
            denied,
            403,
            "bucket:delete",
            {"user_id": stranger.user_id, "access_key_id": stranger.access_key},
        ),
        (bad_signature, 403, "object:read", None),
        (locked, 423, "object:delete", None),
        (
            disabled,
            403,
            "bucket:list",
            {"user_id": stranger.user_id, "access_key_id": stranger.access_key},
        ),
    ]
    records = audit_records(api)
    for response, status, action, principal in expected:
        assert response.status_code == status, response.text
        record = by_request(records, response)
        assert (record["status"], record["action"]) == (status, action)
        if principal is not None:
            assert record["principal"] == principal
    root_user = by_request(records, locked)["principal"]["user_id"]
    assert by_request(records, wrong_secret)["principal"] == {
        "user_id": root_user,
        "access_key_id": server.access_key,
    }
    signed = by_request(records, bad_signature)
    assert signed["principal"] == {"user_id": root_user, "presigned": server.access_key}
    assert signed["path"] == f"/api/v1/buckets/{bucket_name}/objects/k"


def test_logins_tokens_and_presigned_urls_are_named_never_shown(
    api: httpx.Client, server: ServerProcess, bucket_name: str
) -> None:
    account = create_account(api, prefix="signer")
    failed = login(server, account.username, "not the password")
    good = login(server, account.username, account.password)
    token = good.json()["token"]
    listed = httpx.post(
        f"{server.api}/buckets",
        json={"name": bucket_name},
        headers={"Authorization": f"Bearer {token}"},
    )
    api.put(f"/buckets/{bucket_name}/objects/k", content=b"x")
    url = api.post("/presign", json={"bucket": bucket_name, "key": "k", "method": "PUT"}).json()[
        "url"
    ]
    presigned = httpx.put(url, content=b"by url")
    records = audit_records(api)
    assert by_request(records, failed)["principal"] == {"user_id": account.user_id}
    assert (by_request(records, failed)["status"], by_request(records, failed)["action"]) == (
        401,
        "auth:login",
    )
    assert by_request(records, good)["status"] == 200
    named = by_request(records, listed)["principal"]
    fingerprint = "tk_" + hashlib.sha256(token.encode()).hexdigest()[:16]
    assert named == {"user_id": account.user_id, "token": fingerprint}
    record = by_request(records, presigned)
    assert record["principal"]["presigned"] == server.access_key
    assert "?" not in record["path"] and "X-Signature" not in json.dumps(record)


# -- the chain ---------------------------------------------------------------------------------


def test_the_chain_verifies_and_links_every_record(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    for index in range(5):
        api.put(f"/buckets/{bucket_name}/objects/k{index}", content=b"x")
    outcome = verify(api)
    assert outcome["ok"] is True and outcome["first_bad_sequence"] is None
    records = audit_records(api)
    assert outcome["first_sequence"] == 1 == records[0]["sequence"]
    assert records[0]["prev"] == GENESIS
    for before, after in itertools.pairwise(records):
        assert after["sequence"] == before["sequence"] + 1
        assert after["prev"] == before["hash"]
    last = outcome["last_sequence"]
    assert outcome["records"] == last - outcome["first_sequence"] + 1
    assert [r["sequence"] for r in records[:last]] == list(range(1, last + 1))


def test_a_flipped_byte_is_found_with_its_sequence(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": bucket_name})
        victim = api.put(f"/buckets/{bucket_name}/objects/victim", content=b"x")
        for index in range(3):
            api.put(f"/buckets/{bucket_name}/objects/after{index}", content=b"x")
        sequence = by_request(audit_records(api), victim)["sequence"]
    proc.stop()
    (segment,) = segment_files(proc.data_dir)
    lines = segment.read_bytes().split(b"\n")
    line = lines[sequence - 1]
    assert json.loads(line)["sequence"] == sequence
    at = line.index(b"victim")
    lines[sequence - 1] = line[:at] + b"w" + line[at + 1 :]  # victim -> wictim
    segment.write_bytes(b"\n".join(lines))
    proc.start()
    with proc.client() as api:
        outcome = verify(api)
        assert outcome["ok"] is False and outcome["first_bad_sequence"] == sequence
        assert outcome["last_sequence"] == sequence - 1


def test_a_removed_record_is_found(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": bucket_name})
        for index in range(4):
            api.put(f"/buckets/{bucket_name}/objects/k{index}", content=b"x")
    proc.stop()
    (segment,) = segment_files(proc.data_dir)
    lines = segment.read_bytes().split(b"\n")
    del lines[2]  # record 3
    segment.write_bytes(b"\n".join(lines))
    proc.start()
    with proc.client() as api:
        assert verify(api)["first_bad_sequence"] == 3


def test_the_chain_stays_intact_across_sigkill_and_restart(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory()
    acknowledged: list[str] = []
    with proc.client() as api:
        api.post("/buckets", json={"name": bucket_name})
        for index in range(20):
            answer = api.put(f"/buckets/{bucket_name}/objects/k{index}", content=b"x" * index)
            acknowledged.append(answer.headers["X-Request-Id"])
    proc.kill()
    proc.start()
    with proc.client() as api:
        for index in range(5):
            answer = api.delete(f"/buckets/{bucket_name}/objects/k{index}")
            acknowledged.append(answer.headers["X-Request-Id"])
        outcome = verify(api)
        assert outcome["ok"] is True, outcome
        ids = {record["request_id"] for record in audit_records(api)}
        assert set(acknowledged) <= ids


def test_several_serving_processes_keep_one_chain(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory(SERVICE_WORKERS="2", SERVICE_AUDIT_READS="1")
    acknowledged: set[str] = set()
    with proc.client() as api:
        api.post("/buckets", json={"name": bucket_name})
        for index in range(30):
            with httpx.Client(base_url=proc.api, auth=proc.auth) as fresh:  # new connections
                answer = fresh.put(f"/buckets/{bucket_name}/objects/k{index}", content=b"x")
                acknowledged.add(answer.headers["X-Request-Id"])
                got = fresh.get(f"/buckets/{bucket_name}/objects/k{index}")
                acknowledged.add(got.headers["X-Request-Id"])
        records = audit_records(api)
        assert acknowledged <= {record["request_id"] for record in records}
        prefixes = {record["request_id"][:8] for record in records}
        assert len(prefixes) == 2, "records of both processes"
        assert [r["sequence"] for r in records] == list(range(1, len(records) + 1))
        assert verify(api)["ok"] is True


# -- retention -----------------------------------------------------------------------------


def test_retention_prunes_old_segments_and_leaves_a_signed_start(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory(
        SERVICE_AUDIT_RETENTION_DAYS="0.0001",  # 8.64 s
        SERVICE_AUDIT_SEGMENT_BYTES="2048",
    )
    with proc.client() as api:
        api.post("/buckets", json={"name": bucket_name})
        for index in range(12):
            api.put(f"/buckets/{bucket_name}/objects/old{index}", content=b"x")
        time.sleep(9.5)
        deadline = time.monotonic() + 30
        while not (proc.data_dir / "audit" / "anchor.json").exists():
            api.put(f"/buckets/{bucket_name}/objects/new", content=b"y")
            assert time.monotonic() < deadline, "no prune happened"
            time.sleep(0.5)
        for _ in range(10):  # pruning goes on (every second here): read between two prunes
            outcome = verify(api)
            records = audit_records(api)
            if verify(api)["first_sequence"] == outcome["first_sequence"]:
                break
        assert outcome["ok"] is True, outcome
        assert outcome["first_sequence"] > 1
        assert records[0]["sequence"] == outcome["first_sequence"]
        cutoff = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=60)
        assert all(datetime.datetime.fromisoformat(record["time"]) > cutoff for record in records)
    proc.stop()
    anchor_path = proc.data_dir / "audit" / "anchor.json"
    anchor = json.loads(anchor_path.read_text())
    assert set(anchor) == {"format", "sequence", "prev", "pruned_at", "signature"}
    anchor["prev"] = "f" * 64  # an attacker's own starting point, without the secret
    anchor_path.write_text(json.dumps(anchor))
    proc.start()
    with proc.client() as api:
        outcome = verify(api)
        assert outcome["ok"] is False and outcome["first_bad_sequence"] == anchor["sequence"]
    anchor_path.unlink()  # dropping the anchor leaves a first record that is not the first
    with proc.client() as api:
        assert verify(api)["ok"] is False


# -- pages, filters, switches ---------------------------------------------------------------


def test_pages_follow_the_cursor_and_filters_narrow(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    for index in range(7):
        api.put(f"/buckets/{bucket_name}/objects/k{index}", content=b"x")
    mine = audit_records(api, bucket=bucket_name)
    assert len(mine) == 8 and {record["bucket"] for record in mine} == {bucket_name}
    first = api.get("/system/audit", params={"bucket": bucket_name, "limit": 3}).json()
    assert [r["key"] for r in first["records"]] == [None, "k0", "k1"]  # the creation first
    after = api.get(
        "/system/audit", params={"bucket": bucket_name, "limit": 3, "since": first["next_cursor"]}
    ).json()
    assert [r["key"] for r in after["records"]] == ["k2", "k3", "k4"]
    user_id = mine[0]["principal"]["user_id"]
    assert all(
        record["principal"]["user_id"] == user_id for record in audit_records(api, user_id=user_id)
    )
    assert audit_records(api, user_id="u_nobody") == []
    for params in ({"limit": "0"}, {"limit": "1001"}, {"since": "-1"}, {"since": "x"}):
        assert_error(api.get("/system/audit", params=params), 400, "InvalidArgument")


def test_only_an_admin_reads_the_audit_log(api: httpx.Client, server: ServerProcess) -> None:
    account = create_account(api, prefix="curious")
    with account.client(server) as user_api:
        assert_error(user_api.get("/system/audit"), 403, "AccessDenied")
        assert_error(user_api.get("/system/audit/verify"), 403, "AccessDenied")


def test_without_an_audit_log_nothing_is_written(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory(SERVICE_AUDIT="0")
    with proc.client() as api:
        api.post("/buckets", json={"name": bucket_name})
        assert_error(api.get("/system/audit"), 409, "InvalidState")
    assert segment_files(proc.data_dir) == []


# -- no secret, ever ------------------------------------------------------------------------------


def test_no_secret_of_a_whole_run_appears_in_its_audit_files(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory(SERVICE_AUDIT_READS="1")
    secrets_used = {proc.secret_key, proc.admin_password}
    with proc.client() as api:
        account = create_account(api, prefix="secretive")
        secrets_used |= {account.secret_key, account.password}
        token = login(proc, account.username, account.password).json()["token"]
        admin_token = login(proc, "admin", proc.admin_password).json()["token"]
        secrets_used |= {token, admin_token}
        login(proc, account.username, "a-wrong-password-1")
        secrets_used.add("a-wrong-password-1")
        wrong = "sk_a-wrong-secret-for-the-root-key"
        httpx.get(f"{proc.api}/buckets", auth=(proc.access_key, wrong))
        secrets_used.add(wrong)
        created = api.post("/access-keys", json={"user_id": account.user_id}).json()
        secrets_used.add(created["secret_key"])
        bearer = {"Authorization": f"Bearer {token}"}
        httpx.post(f"{proc.api}/buckets", json={"name": bucket_name}, headers=bearer)
        httpx.put(f"{proc.api}/buckets/{bucket_name}/objects/k", content=b"x", headers=bearer)
        for method in ("GET", "PUT"):
            url = httpx.post(
                f"{proc.api}/presign",
                json={"bucket": bucket_name, "key": "k", "method": method},
                headers=bearer,
            ).json()["url"]
            signature = httpx.URL(url).params["X-Signature"]
            secrets_used.add(signature)
            httpx.request(method, url, content=b"y" if method == "PUT" else None)
            httpx.get(url.replace(signature, signature[:-2] + "00"))
        api.patch(f"/users/{account.user_id}", json={"password": "a-new-password-2"})
        secrets_used.add("a-new-password-2")
        assert verify(api)["ok"] is True
    proc.stop()
    files = [path for path in (proc.data_dir / "audit").rglob("*") if path.is_file()]
    assert files
    for path in files:
        text = path.read_bytes()
        for secret in secrets_used:
            assert secret.encode() not in text, f"a secret in {path.name}"
