"""Media fleet job tokens: the only credential a fleet worker ever holds.

A task sent to the fleet (``service.media.fleet_runner``) carries a *claim* token naming a
job and the number of the attempt it is for; it lets a worker claim that attempt and nothing
else. The claim's answer, and every heartbeat's, carry a *lease* token for the same attempt,
valid until the attempt's lease ends (``exp``): with it the worker reads the job's source
object and uploads under the job's output prefix through the ordinary object and multipart
routes (``service.http.authn`` turns it into a principal with a ``JobGrant``), and reports
on its attempt. A token is ``vjt.`` then ``<payload>.<mac>`` (``service.auth.signing``)
under a key derived for this purpose only, so it never passes as a bearer, share or presign
token. Validity beyond the signature (the attempt must be the job's running one) is the
caller's to check against the journaled job.

Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from service.auth.signing import claim_time, derive_key, seal, unseal
from service.auth.tokens import TokenError

_PURPOSE = "service.media.job-token.v1"
PREFIX = "vjt."
"""How a job token starts (so a bearer token is told apart without a signature check)."""

Use = Literal["claim", "lease"]


@dataclass(frozen=True, slots=True)
class JobClaims:
    """What a valid job token says."""

    job_id: str
    attempt: int
    use: Use
    expires_at: float | None
    """Unix seconds; None for a claim token (it waits in the queue for as long as it must)."""


def is_job_token(token: str) -> bool:
    return token.startswith(PREFIX)


def issue_job_token(
    secret: bytes, job_id: str, attempt: int, use: Use, expires_at: float | None = None
) -> str:
    """A token for ``use`` on attempt ``attempt`` of ``job_id``; a lease token expires."""
    claims: dict[str, object] = {"j": job_id, "a": attempt, "u": use}
    if use == "lease":
        if expires_at is None or not math.isfinite(expires_at):
            raise ValueError("a lease token needs a finite expiry")
        claims["exp"] = expires_at
    return PREFIX + seal(derive_key(secret, _PURPOSE), claims)


def verify_job_token(
    secret: bytes, token: str, now: float, *, expired_ok: bool = False
) -> JobClaims | TokenError:
    """The claims of ``token`` if intact (and, unless ``expired_ok``, unexpired)."""
    if not is_job_token(token):
        return TokenError.INVALID
    claims = unseal(derive_key(secret, _PURPOSE), token[len(PREFIX) :])
    if claims is None:
        return TokenError.INVALID
    job_id, attempt, use = claims.get("j"), claims.get("a"), claims.get("u")
    expires_at = claim_time(claims, "exp")
    if (
        not isinstance(job_id, str)
        or isinstance(attempt, bool)
        or not isinstance(attempt, int)
        or attempt < 1
        or use not in ("claim", "lease")
        or (use == "lease") != (expires_at is not None)
    ):
        return TokenError.INVALID
    if expires_at is not None and now >= expires_at and not expired_ok:
        return TokenError.EXPIRED
    return JobClaims(job_id, attempt, "claim" if use == "claim" else "lease", expires_at)
