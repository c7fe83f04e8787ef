"""No secret, password or password hash ever appears in a response or a log line.

One scenario on a fresh server drives every identity path, the failing ones included:
users with passwords, access keys, logins (good, wrong, unknown, throttled, disabled),
bearer tokens, a password change, presigned URLs (used, tampered), revoked keys, bad
input that could be echoed, and a restart. Every response (status, headers, body) is
recorded, and so is everything the server printed. Then:

- no response holds any secret key, secret digest, password or ``$argon2`` hash, except
  that a key's creation response holds that key's own ``secret_key`` and a login response
  its own token;
- no log line holds any of those, nor a bearer token, an ``Authorization`` value or a
  presigned URL's signature.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable
from urllib.parse import parse_qsl, urlsplit

import httpx

from tests.serverproc import ServerProcess


class Recorder:
    """Clients whose every response is kept, with what each response may legitimately hold."""

    def __init__(self, proc: ServerProcess) -> None:
        self.proc = proc
        self.responses: list[httpx.Response] = []
        self.allowed: dict[int, set[str]] = {}
        self.secrets: set[str] = {proc.secret_key}
        self.passwords: set[str] = {proc.admin_password}
        self.tokens: set[str] = set()
        self.signatures: set[str] = set()
        self.authorizations: set[str] = set()

    def _keep(self, response: httpx.Response) -> None:
        response.read()
        self.responses.append(response)

    def client(
        self, auth: tuple[str, str] | None = None, token: str | None = None, *, reuse: bool = True
    ) -> httpx.Client:
        """``reuse=False``: a new connection per request (see ``run_scenario``'s ``anon``)."""
        headers = {}
        if auth is not None:
            basic = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self.authorizations.add(basic)
            headers["Authorization"] = f"Basic {basic}"
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(
            base_url=self.proc.api,
            headers=headers,
            timeout=30.0,
            limits=httpx.Limits(max_keepalive_connections=None if reuse else 0),
            event_hooks={"response": [self._keep]},
        )

    def new_user(self, admin: httpx.Client, name: str, password: str, role: str = "user") -> str:
        self.passwords.add(password)
        created = admin.post("/users", json={"username": name, "password": password, "role": role})
        assert created.status_code == 201, created.text
        return str(created.json()["user_id"])

    def new_key(self, client: httpx.Client, user_id: str | None = None) -> tuple[str, str]:
        body = {"user_id": user_id} if user_id else {}
        response = client.post("/access-keys", json=body)
        assert response.status_code == 201, response.text
        secret = response.json()["secret_key"]
        self.secrets.add(secret)
        self.allowed[id(response)] = {secret}
        return response.json()["access_key_id"], secret

    def login(self, client: httpx.Client, username: str, password: str) -> httpx.Response:
        self.passwords.add(password)
        response = client.post("/auth/login", json={"username": username, "password": password})
        if response.status_code == 200:
            token = response.json()["token"]
            self.tokens.add(token)
            self.allowed[id(response)] = {token}
        return response

    def presign(self, client: httpx.Client, bucket: str, key: str, **fields: object) -> str:
        response = client.post("/presign", json={"bucket": bucket, "key": key, **fields})
        assert response.status_code == 200, response.text
        url = str(response.json()["url"])
        self.signatures.add(dict(parse_qsl(urlsplit(url).query))["X-Signature"])
        return url


def assert_absent(text: str, needles: Iterable[str], where: str) -> None:
    for needle in needles:
        assert needle not in text, f"{needle!r} leaked in {where}"


def run_scenario(rec: Recorder) -> None:
    proc = rec.proc
    # The server closes a connection after refusing an object request in ``prepare``
    # (before its empty body was read), so the anonymous client does not reuse connections.
    with rec.client(proc.auth) as admin, rec.client(reuse=False) as anon:
        alice_id = rec.new_user(admin, "alice", "alice-Pa55word-7f3")
        bob_id = rec.new_user(admin, "bob", "bob-Pa55word-91c", role="admin")
        alice_key = rec.new_key(admin, alice_id)
        bob_key = rec.new_key(admin, bob_id)
        spare_key = rec.new_key(admin, alice_id)
        for path in (
            "/users",
            f"/users/{alice_id}",
            "/access-keys",
            f"/access-keys/{alice_key[0]}",
        ):
            assert admin.get(path).status_code == 200
        admin.get("/access-keys", params={"user_id": alice_id})
        admin.get("/system/info")

        # Logins: good, wrong, unknown, overlong, malformed, then throttled.
        alice_token = rec.login(anon, "alice", "alice-Pa55word-7f3").json()["token"]
        assert rec.login(anon, "alice", "alice-Wrong-guess-1").status_code == 401
        assert rec.login(anon, "mallory", "mallory-Guess-2").status_code == 401
        assert rec.login(anon, "alice", "alice-Overlong-" + "z" * 2000).status_code == 401
        anon.post("/auth/login", content=b'{"username": "alice", "password": "alice-Trunc')
        rec.passwords.add("alice-Trunc")
        for attempt in range(5):
            rec.login(anon, "carol", f"carol-Guess-{attempt}-x")
        assert "Retry-After" in rec.login(anon, "carol", "carol-Guess-final-x").headers

        # Bad input that a careless handler could echo back.
        for body in (
            {"username": "dave", "password": "Sh0rt!"},
            {"username": "dave", "password": "    \t     "},
            {"username": "d e", "password": "dave-Pa55word-b2"},
            {"username": "dave", "password": "dave-Pa55word-b3", "role": "dave-Pa55word-b4"},
        ):
            if not str(body["password"]).isspace():  # a blank needle would match anywhere
                rec.passwords.add(str(body["password"]))
            assert admin.post("/users", json=body).status_code == 400
        rec.passwords.add("eve-Pa55word-unknown-field")
        admin.patch(f"/users/{alice_id}", json={"passw0rd": "eve-Pa55word-unknown-field"})

        # Object traffic by key and by token, presigned URLs used and tampered.
        with rec.client(alice_key) as alice, rec.client(token=alice_token) as alice_by_token:
            assert alice.post("/buckets", json={"name": "alices"}).status_code == 201
            assert alice.put("/buckets/alices/objects/a.txt", content=b"hello").status_code == 200
            assert alice_by_token.get("/buckets/alices/objects/a.txt").content == b"hello"
            get_url = rec.presign(alice, "alices", "a.txt")
            put_url = rec.presign(alice_by_token, "alices", "b.txt", method="PUT")
            assert anon.get(get_url).status_code == 200
            assert anon.put(put_url, content=b"b").status_code == 200
            assert anon.get(get_url.replace("X-Expires=", "X-Expires=1")).status_code == 403
            assert anon.delete(get_url).status_code == 403
            assert alice.get("/users").status_code == 403
            assert alice.get(f"/access-keys/{bob_key[0]}").status_code == 403

        # Credentials that fail.
        for auth in (
            (alice_key[0], "sk_wrong-secret-value-1"),
            ("bk_NOSUCHKEY", alice_key[1]),
            ("alice", "alice-Pa55word-7f3"),
        ):
            with rec.client(auth) as client:
                assert client.get("/buckets").status_code == 401
        with rec.client(token=alice_token + "x") as client:
            assert client.get("/buckets").status_code == 401
        assert admin.patch(f"/access-keys/{spare_key[0]}", json={"status": "revoked"}).json()
        with rec.client(spare_key) as client:
            assert client.get("/buckets").status_code == 401

        # A password change (old token refused), a disabled user, and a deleted one.
        with rec.client(token=alice_token) as client:
            rec.passwords.add("alice-N3w-password-5d")
            changed = client.patch(f"/users/{alice_id}", json={"password": "alice-N3w-password-5d"})
            assert changed.status_code == 200
            assert client.get("/buckets").status_code == 401
        assert rec.login(anon, "alice", "alice-N3w-password-5d").status_code == 200
        assert admin.patch(f"/users/{bob_id}", json={"status": "disabled"}).status_code == 200
        with rec.client(bob_key) as client:
            assert client.get("/buckets").status_code == 403
        assert rec.login(anon, "bob", "bob-Pa55word-91c").status_code == 403
        assert admin.delete(f"/users/{bob_id}").status_code == 204
        anon.get("/nothing-here", params={"secret": alice_key[1]})
    proc.restart()
    with rec.client(alice_key) as alice:
        assert alice.get("/buckets/alices/objects/b.txt").content == b"b"


def test_no_secret_password_or_hash_reaches_a_response_or_a_log_line(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory()
    rec = Recorder(proc)
    run_scenario(rec)
    digests = {hashlib.sha256(secret.encode()).hexdigest() for secret in rec.secrets}
    never = [*rec.secrets, *digests, *rec.passwords, "$argon2", "argon2id"]
    assert len(rec.responses) > 50
    for number, response in enumerate(rec.responses):
        text = f"{response.status_code} {response.headers.multi_items()} {response.text}"
        own = rec.allowed.get(id(response), set())
        assert_absent(text, [s for s in never if s not in own], f"response {number}")
        assert_absent(text, [t for t in rec.tokens if t not in own], f"response {number}")
    proc.stop()  # a graceful stop writes the log lines still held in the batch
    logs = proc.logs()
    assert "status=401" in logs and "status=403" in logs  # the failures were logged
    assert_absent(logs, never, "the logs")
    assert_absent(logs, rec.tokens, "the logs")
    assert_absent(logs, rec.signatures, "the logs")
    assert_absent(logs, rec.authorizations, "the logs")
