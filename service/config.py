"""Server configuration: one frozen dataclass, read from the environment and flags.

Every setting of the contract's Configuration table is an environment variable and a
command-line flag (the flag wins). Settings the contract does not name carry the
``SERVICE_`` prefix too and are documented in docs/configuration.md.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Literal

Durability = Literal["strict", "balanced"]

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the server needs to start; immutable once read."""

    data_dir: str = "./data"
    """All state: journal, payloads, staging."""
    host: str = "127.0.0.1"
    port: int = 9000
    durability: Durability = "strict"
    """strict: fsync data, directory and journal before answering; balanced: OS write-back."""
    staging_ttl: float = 3600.0
    """Stale staging files older than this (seconds) are removed at startup and by the sweep."""
    multipart_ttl: float = 86400.0
    """An open multipart session expires after this many seconds."""
    public_url: str | None = None
    """Base for presigned and share URLs; derived from the request when unset."""
    log_level: str = "info"
    metrics_public: bool = False
    """Serve GET /api/v1/metrics without credentials."""
    max_concurrent_uploads: int = 64
    """Request bodies streamed at once; beyond it a PUT gets 503 with Retry-After."""
    max_object_bytes: int = 5 * 1024 * 1024 * MIB
    """Largest single PUT body (5 TiB)."""
    idle_timeout: float = 60.0
    """Seconds a connection may stay silent (between requests or mid-body) before it is cut."""
    body_timeout: float = 3600.0
    """Upper bound in seconds on receiving one request body."""
    min_body_rate: int = 16 * KIB
    """Bytes/s below which an upload older than ``idle_timeout`` counts as stalled."""
    max_header_bytes: int = 64 * KIB
    gc_interval: float = 600.0
    """Seconds between orphan-payload sweeps."""
    gc_grace: float = 3600.0
    """A payload file younger than this is never collected (an in-flight PUT may own it)."""
    snapshot_every: int = 100_000
    """Journal records between snapshots."""
    snapshot_interval: float = 300.0
    """Seconds between snapshots when at least one record was appended."""
    journal_segment_bytes: int = 64 * MIB
    health_min_free_fraction: float = 0.02
    """GET /health reports ``degraded`` when the data dir's disk has less free space than this."""
    image_max_pixels: int = 50_000_000
    """Largest image (width x height) decoded or produced; more is 413 EntityTooLarge."""
    image_cache_bytes: int = 512 * MIB
    """Bound on the image variant cache under ``<data_dir>/cache/images`` (LRU eviction)."""
    small_object_cache_bytes: int = 32 * MIB
    """Bound on the in-memory cache of small object bodies (<= 64 KiB each) served by GET;
    0 disables it."""
    max_concurrent_video_jobs: int = 1
    """Video packaging jobs run at once (each is one worker process); the rest wait queued."""
    cors_origins: str = ""
    """Origins allowed to call the API from a browser: comma-separated (``https://host``), or
    ``*``; empty means same-origin only (see docs/security.md, CORS)."""
    token_ttl: float = 12 * 3600.0
    """Lifetime in seconds of a bearer token from /auth/login."""
    root_access_key: str | None = None
    root_secret_key: str | None = None
    admin_password: str | None = None
    crash_point: str | None = None
    """Test-only: ``name`` or ``name:N`` makes the process SIGKILL itself at the Nth hit."""
    lifecycle_interval: float = 3600.0
    """Seconds between background passes applying the buckets' lifecycle rules."""
    lifecycle_pass_pause: float = 0.005
    """Seconds a lifecycle pass sleeps after each page (so requests are never starved)."""
    events_retention_seconds: float = 86400.0
    """Object events are kept at least this long for SSE resume and lagging webhooks..."""
    events_retention_count: int = 1_000_000
    """...and at least this many of the newest (docs/events.md)."""
    events_segment_events: int = 10_000
    """Events per file of the event log (retention drops whole files)."""
    webhook_timeout: float = 10.0
    """Seconds one webhook delivery may take before it counts as failed."""
    webhook_max_backoff: float = 3600.0
    """Longest pause in seconds between retries of a failing webhook (exponential up to it)."""
    webhook_hold_seconds: float = 7 * 86400.0
    """How long undelivered events of a failing webhook hold the event log back."""
    scrub_interval_days: float = 30.0
    """One full scrub pass (re-read and verify every payload) per this many days."""
    scrub_rate_mbps: float = 50.0
    """Scrub pace in megabytes (10^6 bytes) per second."""

    @property
    def journal_dir(self) -> str:
        return os.path.join(self.data_dir, "journal")


_ENV_PREFIX = "SERVICE_"
_BOOLEAN_TRUE = {"1", "true", "yes", "on"}


def _coerce(name: str, kind: str, raw: str) -> object:
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "bool":
        return raw.strip().lower() in _BOOLEAN_TRUE
    if name == "durability" and raw not in ("strict", "balanced"):
        raise ValueError(f"durability must be strict or balanced, not {raw!r}")
    return raw


def _kind_of(annotation: object) -> str:
    text = str(annotation)
    if text.startswith("int"):
        return "int"
    if text.startswith("float"):
        return "float"
    if text.startswith("bool"):
        return "bool"
    return "str"


def load_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Build the configuration from ``environ`` (default ``os.environ``) and ``argv`` flags.

    Flags are the field names in kebab case (``--data-dir``); a flag overrides its variable.
    """
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="python -m service", description="Object storage server")
    for field in fields(Config):
        parser.add_argument("--" + field.name.replace("_", "-"), dest=field.name, default=None)
    args = parser.parse_args(list(argv) if argv is not None else None)
    values: dict[str, object] = {}
    for field in fields(Config):
        raw = getattr(args, field.name)
        if raw is None:
            raw = env.get(_ENV_PREFIX + field.name.upper())
        if raw is None or raw == "":
            continue
        try:
            values[field.name] = _coerce(field.name, _kind_of(field.type), raw)
        except ValueError as exc:
            parser.error(f"invalid value for {field.name}: {exc}")
    return Config(**values)  # type: ignore[arg-type]
