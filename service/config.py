"""Server configuration: one frozen dataclass, read from the environment and flags.

Every setting of the contract's Configuration table is an environment variable and a
command-line flag (the flag wins). Settings the contract does not name carry the
``SERVICE_`` prefix too. Each field's docstring is its help text: ``--help`` and the table in
docs/configuration.md (``configuration_table``, compared whole with the file by a test) are
made from the docstrings and ``RULES`` (allowed values), so code, help and docs cannot drift.

A value that is not allowed is a ``ConfigError`` whose message is one line naming the
variable or flag, the value and what is allowed; ``python -m service`` prints it and exits 2.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import itertools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields
from functools import cache
from typing import Any, NoReturn, cast

from journal.model import Durability

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the server needs to start; immutable once read."""

    data_dir: str = "./data"
    """All state: journal, payloads, staging."""
    host: str = "127.0.0.1"
    """Address to listen on (an IP address or host name)."""
    port: int = 9000
    """TCP port to listen on."""
    durability: Durability = "strict"
    """strict: fsync data, directory and journal before answering; balanced: OS write-back."""
    staging_ttl: float = 3600.0
    """Stale staging files older than this (seconds) are removed at startup and by the sweep."""
    multipart_ttl: float = 86400.0
    """An open multipart session expires after this many seconds."""
    public_url: str | None = None
    """Base for presigned and share URLs; derived from the request when unset."""
    workers: int | None = None
    """Serving processes sharing the port (default: the number of CPUs); one of them writes
    the metadata. 1 runs a single process with no supervisor."""
    log_level: str = "info"
    """Lowest level of the log lines written to stderr."""
    metrics_public: bool = False
    """Serve GET /api/v1/metrics without credentials."""
    max_concurrent_uploads: int = 64
    """Request bodies streamed at once by each serving process; beyond it a PUT waits for a
    slot (SERVICE_QUEUE_WAIT), then gets 503 with Retry-After."""
    max_uploads_per_user: int = 16
    """Request bodies one user (all its keys, tokens and presigned URLs) streams at once in
    each serving process; beyond it that user's PUT waits for a slot (SERVICE_QUEUE_WAIT), then
    gets 429 with Retry-After, so slow uploads of one user never hold every slot."""
    queue_wait: float = 10.0
    """Seconds a request over a per-user cap (uploads, event streams) waits for a slot
    before it is answered 429 TooManyRequests."""
    max_streams_per_user: int = 16
    """Event streams one user may have open at once, over the whole service; one more waits
    (SERVICE_QUEUE_WAIT), then gets 429."""
    max_object_bytes: int = 5 * 1024 * 1024 * MIB
    """Largest single PUT body (5 TiB)."""
    idle_timeout: float = 60.0
    """Seconds a connection may stay silent (between requests or mid-body) before it is cut."""
    body_timeout: float = 3600.0
    """Upper bound in seconds on receiving one request body."""
    min_body_rate: int = 16 * KIB
    """Bytes/s an upload must average over each window of ``idle_timeout`` seconds; a slower
    one is cut (0: no minimum)."""
    max_header_bytes: int = 64 * KIB
    """Largest request line plus headers; more is refused (400) and the connection closed."""
    gc_interval: float = 600.0
    """Seconds between orphan-payload sweeps."""
    gc_grace: float = 3600.0
    """A payload file younger than this is never collected (an in-flight PUT may own it).
    It must exceed the longest time between a PUT's promotion and its commit (milliseconds,
    seconds under heavy load): 0 is safe only while nothing writes."""
    snapshot_every: int = 100_000
    """Journal records between snapshots."""
    snapshot_interval: float = 300.0
    """Seconds between snapshots when at least one record was appended."""
    journal_segment_bytes: int = 64 * MIB
    """Size at which the journal starts a new segment file."""
    health_min_free_fraction: float = 0.02
    """GET /health reports ``degraded`` when the data dir's disk has less free space than this."""
    image_max_pixels: int = 50_000_000
    """Largest image (width x height) decoded or produced; more is 413 EntityTooLarge."""
    image_memory_budget: int = 512 * MIB
    """Bytes that image renders running at once may hold, estimated from each source's
    header before decoding; more renders wait their turn (a single larger one runs alone)."""
    image_workers: int = 0
    """Image render processes at most (0: the number of CPUs); idle ones exit after 2 s."""
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
    """First start only: the root access key id (``bk_...``); generated when unset."""
    root_secret_key: str | None = None
    """First start only: the root secret key (``sk_...``); generated when unset."""
    admin_password: str | None = None
    """First start only: the password of user ``admin``; generated when unset."""
    archive: str | None = None
    """Continuous archive target: a directory (local or mounted) or ``rclone:REMOTE:PATH``;
    every payload, journal record and snapshot is shipped there as it commits (see
    docs/replication.md). Empty: no archive."""
    archive_retention_days: float = 7.0
    """Days of history the archive keeps restorable (fractions allowed)."""
    follow: str | None = None
    """Run as a standby of the primary at this URL (``http://host:port``): copy its state,
    follow its journal, serve reads and refuse writes (see docs/replication.md)."""
    follow_credentials: str | None = None
    """A standby's admin access key of its primary, ``bk_ID:sk_SECRET``."""
    follow_reseed: bool = False
    """With ``follow``: discard this data dir's state and copy the primary afresh (a former
    primary that diverged); set it for one start (see docs/replication.md)."""
    replication: str = "async"
    """Primary: acknowledge writes without waiting for a standby (async) or only once one
    holds them durably (sync)."""
    replication_timeout: float = 10.0
    """Primary in sync mode: seconds a write waits for a standby's confirmation before it
    answers 503 ReplicationTimeout."""
    replication_max_lag: float = 30.0
    """Standby: seconds behind its primary beyond which /health says degraded."""
    crash_point: str | None = None
    """Test-only: ``name`` or ``name:N`` makes the process SIGKILL itself at the Nth hit."""
    clock_offset: float = 0.0
    """Test-only: seconds added to the clock events are stamped with (a server whose clock is
    ahead, or, started after one that was, behind: the object lock's clock rule)."""
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
    events_recent: int = 10_000
    """Test-only: the newest object events kept in memory (older ones are read from files)."""
    webhook_timeout: float = 10.0
    """Seconds one webhook delivery may take before it counts as failed."""
    webhook_max_backoff: float = 3600.0
    """Longest pause in seconds between retries of a failing webhook (exponential up to it)."""
    webhook_hold_seconds: float = 7 * 86400.0
    """How long undelivered events of a failing webhook hold the event log back."""
    webhook_allowed_networks: str = ""
    """Networks webhooks may reach besides public addresses (loopback, private and
    link-local ones are refused by default): comma-separated CIDRs or addresses, or ``*``."""
    scrub_interval_days: float = 30.0
    """One full scrub pass (re-read and verify every payload) per this many days."""
    scrub_rate_mbps: float = 50.0
    """Scrub pace in megabytes (10^6 bytes) per second."""
    audit: bool = True
    """Keep the audit log: one hash-chained record per request that reached authorisation
    (docs/security.md, "Audit log"). 0 keeps none (for measurements; not for production)."""
    audit_reads: bool = False
    """Record reads (GET, HEAD, lists) in the audit log too; writes, admin actions and refusals
    are always recorded."""
    audit_retention_days: float = 90.0
    """Days audit records are kept; older segments are removed, leaving a signed starting point
    (fractions allowed)."""
    audit_segment_bytes: int = 16 * MIB
    """Size at which the audit log starts a new segment file (retention removes whole files)."""
    media_queue: str | None = None
    """Run video packaging jobs on a fleet of media workers through this Redis
    (``redis://host:port/db``; see docs/media.md, Running media workers); unset: in the
    server's own worker processes."""
    media_lease: float = 60.0
    """Seconds a fleet worker holds a job without a heartbeat; a worker that dies or stalls
    loses the job after this and it is sent again."""

    @property
    def journal_dir(self) -> str:
        return os.path.join(self.data_dir, "journal")


_ENV_PREFIX = "SERVICE_"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_INT = re.compile(r"^[0-9]{1,18}$")
_NUMBER = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,9})?$")


class ConfigError(ValueError):
    """A setting that cannot be used; the message is one line saying what and how to fix."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What values a setting allows (beyond its type)."""

    minimum: float | None = 0
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    url: bool = False
    test_only: bool = False
    """Hidden from ``--help`` and the docs table (still read)."""
    allowed: str = ""
    """What is allowed, in words, when the type and bounds do not say it."""
    validator: str = ""
    """``module:Class.method`` called with the text; a ``ValueError`` it raises refuses the
    value (imported only when the setting is given, so the owner module may sit above this
    one)."""


RULES: Mapping[str, Rule] = {
    "data_dir": Rule(allowed="a directory path (created if missing)"),
    "host": Rule(allowed="an IP address or host name of this machine"),
    "port": Rule(minimum=1, maximum=65535),
    "durability": Rule(choices=("strict", "balanced")),
    "public_url": Rule(url=True),
    "workers": Rule(minimum=1, maximum=1024),
    "log_level": Rule(choices=("debug", "info", "warning", "error")),
    "max_concurrent_uploads": Rule(minimum=1),
    "max_uploads_per_user": Rule(minimum=1),
    "queue_wait": Rule(maximum=3600),
    "max_streams_per_user": Rule(minimum=1),
    "max_header_bytes": Rule(minimum=1024),
    "snapshot_every": Rule(minimum=1),
    "journal_segment_bytes": Rule(minimum=4096),
    "audit_retention_days": Rule(minimum=0.0001, maximum=36500),
    "audit_segment_bytes": Rule(minimum=1024),
    "health_min_free_fraction": Rule(maximum=1),
    "image_max_pixels": Rule(minimum=1),
    "image_memory_budget": Rule(minimum=1),
    "image_workers": Rule(maximum=256),
    "max_concurrent_video_jobs": Rule(minimum=1),
    "crash_point": Rule(test_only=True),
    "events_recent": Rule(test_only=True),
    "clock_offset": Rule(test_only=True),
    "cors_origins": Rule(
        allowed="comma-separated origins (scheme://host[:port]) or *",
        validator="service.limits.cors:CorsPolicy.parse",
    ),
    "media_queue": Rule(
        allowed="a redis:// or rediss:// URL (host, port, database number)",
        validator="service.media.fleet_queue:parse_queue_url",
    ),
    "media_lease": Rule(minimum=1, maximum=86400),
    "follow": Rule(url=True),
    "follow_credentials": Rule(
        allowed="an access key and its secret: bk_ID:sk_SECRET",
        validator="service.replication.wire:parse_credentials",
    ),
    "replication": Rule(choices=("async", "sync")),
    "replication_timeout": Rule(minimum=0.1, maximum=3600),
    "replication_max_lag": Rule(minimum=0.1),
    "webhook_allowed_networks": Rule(
        allowed="comma-separated CIDR networks or addresses (10.0.0.0/8,::1), or *",
        validator="service.events.targets:TargetPolicy.parse",
    ),
}
"""Allowed values by field; a field not named here takes any value of its type >= 0."""


def env_name(name: str) -> str:
    return _ENV_PREFIX + name.upper()


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def _kind_of(field: Field[Any]) -> str:
    text = str(field.type)
    for kind in ("int", "float", "bool"):
        if text.startswith(kind):
            return kind
    return "str"


@cache
def field_docs() -> dict[str, str]:
    """Each field's docstring (the string right after it in ``Config``), on one line."""
    tree = ast.parse(inspect.getsource(Config))
    docs: dict[str, str] = {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    for previous, node in itertools.pairwise(body):
        if (
            isinstance(previous, ast.AnnAssign)
            and isinstance(previous.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[previous.target.id] = " ".join(node.value.value.split())
    return docs


def allowed_values(field: Field[Any]) -> str:
    """What ``field`` accepts, in words (help, docs and error messages)."""
    rule = RULES.get(field.name, Rule())
    kind = _kind_of(field)
    if rule.allowed:
        return rule.allowed
    if rule.choices:
        return " | ".join(rule.choices)
    if kind == "bool":
        return "1 | 0 (also true/false, yes/no, on/off)"
    if rule.url:
        return "an http:// or https:// URL"
    if kind in ("int", "float"):
        noun = "integer" if kind == "int" else "number"
        low, high = rule.minimum, rule.maximum
        if low is not None and high is not None:
            return f"{noun} {_number(low)}..{_number(high)}"
        if low is not None:
            return f"{noun} >= {_number(low)}"
        return noun
    return "text"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def default_text(field: Field[Any]) -> str:
    if field.name == "workers":
        return "number of CPUs"
    if field.default is MISSING or field.default is None:
        return "unset"
    if isinstance(field.default, bool):
        return "1" if field.default else "0"
    return str(field.default)


def parse_value(field: Field[Any], raw: str, given_as: str) -> object:
    """``raw`` as ``field``'s type within its rule; ``ConfigError`` naming ``given_as``."""
    rule = RULES.get(field.name, Rule())
    kind = _kind_of(field)
    text = raw.strip()
    value: object = text
    if kind == "bool":
        if text.lower() not in _TRUE | _FALSE:
            _refuse(field, raw, given_as)
        return text.lower() in _TRUE
    if kind in ("int", "float"):
        if not (_INT if kind == "int" else _NUMBER).match(text):
            _refuse(field, raw, given_as)
        number = int(text) if kind == "int" else float(text)
        if (rule.minimum is not None and number < rule.minimum) or (
            rule.maximum is not None and number > rule.maximum
        ):
            _refuse(field, raw, given_as)
        return number
    if rule.choices and text.lower() not in rule.choices:
        _refuse(field, raw, given_as)
    if rule.choices:
        return text.lower()
    if rule.url and not re.match(r"^https?://[^\s/?#]+", text):
        _refuse(field, raw, given_as)
    if rule.validator:
        try:
            _resolve(rule.validator)(text)
        except ValueError as exc:
            _refuse(field, raw, given_as, " ".join(str(exc).split()))
    return value


def _resolve(target: str) -> Callable[[str], object]:
    module_name, _, attributes = target.partition(":")
    found: Any = importlib.import_module(module_name)
    for attribute in attributes.split("."):
        found = getattr(found, attribute)
    return cast(Callable[[str], object], found)


def _refuse(field: Field[Any], raw: str, given_as: str, why: str = "") -> NoReturn:
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    because = f" ({why})" if why else ""
    raise ConfigError(
        f"invalid value {shown!r} for {given_as}{because}: allowed is {allowed_values(field)}"
    )


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one ``ConfigError`` line, not usage text and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (see python -m service --help)")


def build_parser() -> argparse.ArgumentParser:
    """The command line: one flag per setting, each described; test-only flags hidden."""
    parser = _Parser(
        prog="python -m service",
        description="Object storage server. Every flag is also an environment variable "
        "(shown with it); the flag wins. Sizes are bytes, durations seconds. "
        "See docs/configuration.md.",
    )
    docs = field_docs()
    for field in fields(Config):
        rule = RULES.get(field.name, Rule())
        if rule.test_only:
            text = argparse.SUPPRESS
        else:
            text = (
                f"{docs.get(field.name, '')} [env {env_name(field.name)}; default "
                f"{default_text(field)}; allowed: {allowed_values(field)}]"
            ).replace("%", "%%")
        parser.add_argument(
            flag_name(field.name),
            dest=field.name,
            default=None,
            metavar=_metavar(field),
            help=text,
        )
    return parser


def _metavar(field: Field[Any]) -> str:
    choices = RULES.get(field.name, Rule()).choices
    if choices:
        return "{" + ",".join(choices) + "}"
    kind = _kind_of(field)
    return "TEXT" if kind == "str" else kind.upper()


def load_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Build the configuration from ``environ`` (default ``os.environ``) and ``argv`` flags.

    Flags are the field names in kebab case (``--data-dir``); a flag overrides its variable.
    Raises ``ConfigError`` for an unknown flag or a value that is not allowed.
    """
    env = os.environ if environ is None else environ
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    values: dict[str, object] = {}
    for field in fields(Config):
        raw = getattr(args, field.name)
        given_as = flag_name(field.name)
        if raw is None:
            raw = env.get(env_name(field.name))
            given_as = env_name(field.name)
        if raw is None or raw == "":
            continue
        values[field.name] = parse_value(field, raw, given_as)
    if values.get("follow_reseed") and not values.get("follow"):
        raise ConfigError("SERVICE_FOLLOW_RESEED needs SERVICE_FOLLOW (the primary to copy)")
    if values.get("follow") and not values.get("follow_credentials"):
        raise ConfigError(
            "SERVICE_FOLLOW needs SERVICE_FOLLOW_CREDENTIALS (an admin key of the primary: "
            "bk_ID:sk_SECRET)"
        )
    return Config(**values)  # type: ignore[arg-type]


def configuration_table() -> str:
    """The markdown table of docs/configuration.md (every setting but the test-only)."""
    docs = field_docs()
    lines = ["| variable | flag | default | allowed | meaning |", "|---|---|---|---|---|"]
    for field in fields(Config):
        if RULES.get(field.name, Rule()).test_only:
            continue
        cells = (
            f"`{env_name(field.name)}`",
            f"`{flag_name(field.name)}`",
            f"`{default_text(field)}`",
            allowed_values(field).replace("|", "\\|"),
            docs.get(field.name, ""),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
