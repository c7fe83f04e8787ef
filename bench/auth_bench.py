"""Authentication cost: 4 KiB object GETs by access key, by bearer token and by presigned URL.

The issue's target is "auth costs < 10%" of a request. ``run()`` measures it two ways:

1. Throughput, black-box: a real server (``python -m service`` on a temporary data dir, as
   the tests start it) serves the same 4 KiB object to ``wrk`` (1 thread, 8 connections;
   C, so the load generator does not eat the server's CPU the way a Python client would)
   with each credential:

   - ``basic``: ``Authorization: Basic`` with an access key (dict lookup, one SHA-256,
     ``compare_digest``, an in-memory last-use touch);
   - ``bearer``: ``Authorization: Bearer`` with a login token (HMAC check, user lookup);
   - ``presign``: a presigned GET URL (HMAC over the canonical string, signer lookup),
     the same object and handler with no ``Authorization`` header at all;
   - ``health``: ``GET /health``, no authentication and a trivial handler: the floor of the
     HTTP stack and access log, for context (it is not the same request path).

   Without ``wrk`` (``apt-get install wrk``), 4 threads of ``httpx`` clients stand in; their
   figures are lower and noisier, as the client then competes for the same CPUs.

2. Directly, in-process: ``authenticate()`` (and ``presigned_principal``) timed on a request
   with the same headers and a state holding the same user and key, in µs per call (best of
   5 repeats). The server's event loop is one thread and saturated under load, so a
   request's share of it is ``1 / (requests/s)``; ``auth share`` is the authenticate time
   divided by that.

Throughput runs are interleaved and rotated (A B C D, B C D A, ...), and each figure is the
median of 3, because a shared machine's speed drifts. Takes about a minute. ``python
bench/auth_bench.py`` prints a markdown table.

Thread-safety: a script; the fallback load generator runs its own threads.
"""

from __future__ import annotations

import base64
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from service.auth import digest_secret, issue_token, presign_expires_at, presign_query  # noqa: E402
from service.engine.key_usage import KeyUsage  # noqa: E402
from service.http.authn import authenticate, presigned_principal  # noqa: E402
from service.meta import MetaState, records  # noqa: E402
from tests.serverproc import ServerProcess  # noqa: E402

OBJECT_BYTES = 4096
BUCKET = "auth-bench"
KEY = "obj-4k"
CASES = ("basic", "bearer", "presign", "health")
REPEATS = 3
SECONDS_PER_RUN = 4
CONNECTIONS = 8
FALLBACK_THREADS = 4
DIRECT_CALLS = 20_000


def _basic_header(key_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{key_id}:{secret}".encode()).decode()


def _prepare(proc: ServerProcess) -> dict[str, tuple[str, dict[str, str]]]:
    """Create the object, log in and presign; (url, headers) per case."""
    with proc.client() as api:
        assert api.post("/buckets", json={"name": BUCKET}).status_code == 201
        put = api.put(f"/buckets/{BUCKET}/objects/{KEY}", content=b"x" * OBJECT_BYTES)
        assert put.status_code == 200, put.text
        login = api.post("/auth/login", json={"username": "admin", "password": proc.admin_password})
        token = login.json()["token"]
        presigned = api.post("/presign", json={"bucket": BUCKET, "key": KEY, "expires_in": 3600})
    object_url = f"{proc.api}/buckets/{BUCKET}/objects/{KEY}"
    cases = {
        "basic": (object_url, {"Authorization": _basic_header(*proc.auth)}),
        "bearer": (object_url, {"Authorization": f"Bearer {token}"}),
        "presign": (presigned.json()["url"], {}),
        "health": (f"{proc.url}/health", {}),
    }
    for url, headers in cases.values():
        response = httpx.get(url, headers=headers)
        assert response.status_code == 200, response.text
    return cases


def _wrk(url: str, headers: dict[str, str]) -> float:
    command = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{SECONDS_PER_RUN}s"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in output:
        raise RuntimeError(f"wrk saw failed requests:\n{output}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if match is None:
        raise RuntimeError(f"unexpected wrk output:\n{output}")
    return float(match.group(1))


def _httpx_threads(url: str, headers: dict[str, str]) -> float:
    counts = [0] * FALLBACK_THREADS
    deadline = time.perf_counter() + SECONDS_PER_RUN

    def worker(index: int) -> None:
        with httpx.Client(headers=headers) as client:
            while time.perf_counter() < deadline:
                if client.get(url).status_code != 200:
                    raise RuntimeError("a benchmark request failed")
                counts[index] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(FALLBACK_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def _per_call_us(call: Callable[[], object]) -> float:
    call()  # fail loudly before timing
    best = min(timeit.Timer(call).repeat(5, DIRECT_CALLS))
    return best / DIRECT_CALLS * 1e6


def _direct_auth_us(cases: dict[str, tuple[str, dict[str, str]]]) -> dict[str, float]:
    """authenticate()'s cost per call in-process, on requests shaped like wrk's."""
    secret = b"s" * 32
    key_id, key_secret = "bk_benchkey", "sk_bench-secret-0123456789abcdef"
    state = MetaState()
    now_ms = int(time.time() * 1000) - 10_000
    for event in (
        records.user_created(
            user_id="u_bench", username="bench", password_hash="-", role="admin", at=now_ms
        ),
        records.access_key_created(
            access_key_id=key_id,
            user_id="u_bench",
            name="bench",
            secret_digest=digest_secret(key_secret),
            at=now_ms,
        ),
    ):
        assert state.apply(event).ok
    token, _ = issue_token(secret, "u_bench", time.time(), 3600.0)
    expires = presign_expires_at(time.time(), 3600)
    query = presign_query(secret, "GET", BUCKET, KEY, expires, key_id)
    path = urlsplit(cases["basic"][0]).path

    def request(uri: str, extra: dict[str, str]) -> HTTPServerRequest:
        headers = HTTPHeaders({"Host": "127.0.0.1:9000", **extra})
        return HTTPServerRequest(
            start_line=RequestStartLine("GET", uri, "HTTP/1.1"), headers=headers
        )

    basic = request(path, {"Authorization": _basic_header(key_id, key_secret)})
    bearer = request(path, {"Authorization": f"Bearer {token}"})
    presigned = request(path + "?" + "&".join(f"{k}={v}" for k, v in query.items()), {})
    usage = KeyUsage()
    return {
        "basic": _per_call_us(lambda: authenticate(state, usage, secret, basic)),
        "bearer": _per_call_us(lambda: authenticate(state, usage, secret, bearer)),
        "presign": _per_call_us(lambda: presigned_principal(state, secret, presigned, BUCKET, KEY)),
    }


def run() -> list[dict[str, Any]]:
    """Run every measurement; one dict per table row (see the module docstring)."""
    load = _wrk if shutil.which("wrk") else _httpx_threads
    scratch = Path(tempfile.mkdtemp(prefix="auth-bench-"))
    proc = ServerProcess(scratch / "data", env_overrides={"SERVICE_DURABILITY": "balanced"})
    proc.start()
    try:
        cases = _prepare(proc)
        rates: dict[str, list[float]] = {case: [] for case in CASES}
        for repeat in range(REPEATS):
            for index in range(len(CASES)):
                case = CASES[(index + repeat) % len(CASES)]
                rates[case].append(load(*cases[case]))
    finally:
        proc.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    direct = _direct_auth_us(cases)
    generator = (
        f"wrk 1 thread, {CONNECTIONS} connections"
        if load is _wrk
        else f"httpx, {FALLBACK_THREADS} threads"
    )
    rows: list[dict[str, Any]] = []
    for case in CASES:
        per_second = statistics.median(rates[case])
        per_request_us = 1e6 / per_second
        auth_us = direct.get(case)
        rows.append(
            {
                "name": case,
                "load": generator,
                "requests_per_second": per_second,
                "runs": rates[case],
                "per_request_us": per_request_us,
                "auth_us": auth_us,
                "auth_share": None if auth_us is None else auth_us / per_request_us,
            }
        )
    return rows


_LABELS = {
    "basic": "4 KiB GET, access key (Basic)",
    "bearer": "4 KiB GET, bearer token",
    "presign": "4 KiB GET, presigned URL",
    "health": "GET /health, no auth (stack floor)",
}


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| request | req/s (median of 3) | runs | µs/request | authenticate() µs | auth share |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        runs = ", ".join(f"{rate:,.0f}" for rate in row["runs"])
        auth = "-" if row["auth_us"] is None else f"{row['auth_us']:.1f}"
        share = "-" if row["auth_share"] is None else f"{row['auth_share']:.1%}"
        lines.append(
            f"| {_LABELS[row['name']]} | {row['requests_per_second']:,.0f} | {runs} | "
            f"{row['per_request_us']:.0f} | {auth} | {share} |"
        )
    by_name = {row["name"]: row for row in rows}
    verdicts = [f"load generator: {rows[0]['load']}"]
    for name in ("basic", "bearer", "presign"):
        share = by_name[name]["auth_share"]
        verdicts.append(
            f"{name}: auth share {share:.1%} (target < 10%: {'met' if share < 0.10 else 'NOT met'})"
        )
    spread = by_name["basic"]["requests_per_second"] / by_name["presign"]["requests_per_second"]
    verdicts.append(f"basic / presign throughput = {spread:.2f}")
    return "\n".join(lines + [""] + [f"- {verdict}" for verdict in verdicts])


if __name__ == "__main__":
    print(_markdown(run()))
