"""Running schemathesis (its CLI, as a subprocess) against a live server, and its figures.

The CLI runs as a user runs it, from ``tests/openapi/schemathesis.toml`` (the exclusions,
each naming its reason) plus the size of the run, with an NDJSON event report that this
module reads for the figures: operations, test cases, 5xx answers and failed checks.

The run authenticates with a Bearer token of an admin user made for it, never the root key
the test uses to check the server afterwards: given an access key, the fuzzer uses its id
as a value to try and revokes the key it runs with.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.serverproc import ServerProcess

CONFIG = Path(__file__).with_name("schemathesis.toml")
PHASES = "examples,coverage,fuzzing,stateful"


@dataclass
class Figures:
    """What one run did, from its event report."""

    operations: int = 0
    test_cases: int = 0
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    """One line per failed check: operation, check, code and message."""
    errors: list[str] = field(default_factory=list)
    links_covered: int = 0
    token: str = ""
    exit_code: int = 0
    output: str = ""

    @property
    def server_errors(self) -> int:
        """Answers >= 500, whether or not a check was excluded for them."""
        return sum(count for status, count in self.statuses.items() if status >= 500)

    def summary(self) -> str:
        return (
            f"schemathesis: {self.operations} operations, {self.test_cases} test cases, "
            f"{self.requests} requests, {self.server_errors} 5xx, "
            f"{self.links_covered} links covered, "
            f"{len(self.failures)} failed checks, {len(self.errors)} errors"
        )


def fuzzer_token(server: ServerProcess) -> str:
    """A Bearer token of an admin user made for the run (never the root key's user)."""
    password = secrets.token_urlsafe(18)
    with server.client() as client:
        created = client.post(
            "/users", json={"username": "schemathesis", "password": password, "role": "admin"}
        )
        created.raise_for_status()
        login = client.post("/auth/login", json={"username": "schemathesis", "password": password})
        login.raise_for_status()
    return str(login.json()["token"])


def run_config(directory: Path, max_steps: int, token: str) -> Path:
    """The checked-in configuration with this run's step budget and credentials."""
    text = CONFIG.read_text().replace(
        "[phases.stateful]\n", f"[phases.stateful]\nmax-steps = {max_steps}\n", 1
    )
    text += f'\n[auth.openapi.bearerAuth]\nbearer = "{token}"\n'
    path = directory / "schemathesis.toml"
    path.write_text(text)
    return path


REPO_ROOT = Path(__file__).resolve().parents[2]
HOOKS = {
    # A serializer for the batch upload's tar bodies (``st_hooks``), importable from the run's
    # working directory.
    "SCHEMATHESIS_HOOKS": "tests.openapi.st_hooks",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
}


def run(
    server: ServerProcess,
    directory: Path,
    *,
    max_examples: int,
    max_steps: int,
    seed: int = 1,
    timeout: float = 1800,
) -> Figures:
    """One deterministic schemathesis run against ``server``; its figures."""
    report = directory / "events.ndjson"
    token = fuzzer_token(server)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(run_config(directory, max_steps, token)),
        "--no-color",
        "run",
        f"{server.api}/openapi.json",
        "--url",
        server.url,
        "--phases",
        PHASES,
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--continue-on-failure",
        "--request-timeout",
        "30",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
    ]
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(directory),
        env={**os.environ, "NO_COLOR": "1", **HOOKS},
        check=False,
    )
    figures = read_report(report)
    figures.exit_code = completed.returncode
    figures.output = completed.stdout + completed.stderr
    figures.token = token
    covered = re.search(r"API Links:\s+(\d+) covered", figures.output)
    figures.links_covered = int(covered.group(1)) if covered else 0
    return figures


def read_report(path: Path) -> Figures:
    """The figures in a schemathesis NDJSON event report."""
    figures = Figures()
    if not path.exists():
        return figures
    for line in path.read_text().splitlines():
        for name, body in json.loads(line).items():
            if name == "LoadingFinished":
                figures.operations = body["statistic"]["operations"]["selected"]
            elif name == "ScenarioFinished":
                add_scenario(figures, body)
            elif name == "NonFatalError":
                figures.errors.append(json.dumps(body)[:500])
    return figures


def add_scenario(figures: Figures, body: dict[str, Any]) -> None:
    recorder = body.get("recorder")
    if not isinstance(recorder, dict):
        return
    label = recorder.get("label", "?")
    figures.test_cases += len(recorder.get("cases", {}))
    for interaction in recorder.get("interactions", {}).values():
        response = interaction.get("response")
        figures.requests += 1
        if response is not None:
            figures.statuses[int(response["status_code"])] += 1
    interactions = recorder.get("interactions", {})
    for case_id, checks in recorder.get("checks", {}).items():
        for check in checks:
            if check.get("status") != "failure":
                continue
            failure = (check.get("failure_info") or {}).get("failure") or {}
            message = " ".join(str(failure.get("message", "")).split())
            figures.failures.append(
                f"{label}: {check['name']} {failure.get('code', '')} {message} "
                f"<- {describe(interactions.get(case_id))}"[:800]
            )


def describe(interaction: dict[str, Any] | None) -> str:
    """The request line and the answer of one recorded interaction, briefly."""
    if not interaction:
        return "?"
    request, response = interaction.get("request", {}), interaction.get("response") or {}
    content = response.get("content") or {}
    body = base64.b64decode(content.get("$base64", "")).decode("utf-8", "replace")[:200]
    headers = {
        name: values
        for name, values in request.get("headers", {}).items()
        if name.lower() != "authorization"
    }
    return (
        f"{request.get('method')} {str(request.get('uri'))[:160]} {headers} -> "
        f"{response.get('status_code')} {body}"
    )
