"""Paths and schemas of the media fleet (``service/http/fleet_handlers.py``): a worker's
attempt routes, authenticated by a job token, and the admins' list of workers.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.media.fleet_book import MAX_ERROR_CHARS, MAX_NAME_CHARS
from service.openapi.operations import json_body, ok, operation, path_param
from service.openapi.requests import body
from service.openapi.schemas import COUNT, TIMESTAMP, closed, nullable, ref

API = "/api/v1"
JOB_TOKEN: list[dict[str, list[str]]] = [{"jobToken": []}]
JOB_ID = path_param("job_id", "The job's `job_id`.")
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS}
ATTEMPT_ERRORS = (400, 401, 403, 404, 409, 413, 503)
LEASE_FIELDS: dict[str, Any] = {
    "attempt": {"type": "integer", "minimum": 1},
    "token": {"type": "string", "description": "The lease token to use from now on."},
    "lease_seconds": {"type": "number", "minimum": 0},
    "lease_expires_at": TIMESTAMP,
}

JOB_TOKEN_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "A media fleet job token (`vjt.`...): the claim token a task carries, or "
    "the lease token a claim or heartbeat answered. It reaches one job only (its source "
    "object, multipart uploads under its output prefix) until the attempt's lease ends.",
}


def attempt(verb: str, summary: str, request: str, response: str) -> dict[str, Any]:
    return {
        "post": operation(
            f"{verb}Attempt",
            summary,
            tag="media",
            description="Called by a media fleet worker with the task's job token "
            "(docs/media.md, Running media workers). 409 InvalidState: the attempt is not "
            "(or no longer) the job's running one, or this server runs no fleet.",
            security=JOB_TOKEN,
            parameters=[JOB_ID],
            request_body=json_body(request),
            responses={200: ok(summary + ".", response)},
            errors=ATTEMPT_ERRORS,
        )
    }


def fleet_paths() -> dict[str, Any]:
    jobs = f"{API}/videos/jobs/{{job_id}}"
    return {
        f"{jobs}/claim": attempt("claim", "Claim a job's next attempt", "AttemptClaim", "Claimed"),
        f"{jobs}/heartbeat": attempt(
            "heartbeat", "Renew an attempt's lease", "AttemptHeartbeat", "Lease"
        ),
        f"{jobs}/complete": attempt(
            "complete", "Report an attempt's outputs", "AttemptComplete", "Job"
        ),
        f"{jobs}/fail": attempt("fail", "Report that a job failed", "AttemptFail", "Job"),
        f"{jobs}/outputs": {
            "post": operation(
                "sendAttemptOutputs",
                "Send an attempt's output files in one tar stream",
                tag="media",
                description="Called by a media fleet worker with its lease token, on any "
                "serving process. Each regular file of the tar stream (ustar or pax) is an "
                "output by its name below the output prefix and is kept as an open multipart "
                "upload holding it as part 1, invisible until the attempt's completion names "
                "it. Any member that is not an output (another name, a link, a name twice) "
                "refuses the whole request (400) and nothing is kept "
                "(docs/media.md, Running media workers).",
                security=JOB_TOKEN,
                parameters=[JOB_ID],
                request_body={
                    "required": True,
                    "content": {
                        "application/x-tar": {"schema": {"type": "string", "format": "binary"}}
                    },
                },
                responses={200: ok("The uploads holding the outputs.", "AttemptOutputs")},
                errors=(400, 401, 403, 409, 413, 503, 507),
            )
        },
        f"{API}/videos/workers": {
            "get": operation(
                "listWorkers",
                "The media fleet's workers (admin)",
                tag="media",
                responses={200: ok("Workers seen since the server started.", "WorkerList")},
                errors=(401, 403),
            )
        },
    }


def fleet_schemas() -> dict[str, Any]:
    parts = {
        "type": "array",
        "minItems": 1,
        "items": body({"part_number": {"type": "integer"}, "etag": {"type": "string"}}),
    }
    uploads = {
        "type": "object",
        "description": "Each output's name (below the output prefix) and the multipart upload "
        "holding it, all its parts listed.",
        "additionalProperties": body(
            {"upload_id": {"type": "string"}, "parts": parts}, ("upload_id", "parts")
        ),
    }
    return {
        "AttemptOutputs": closed(
            {
                "outputs": {
                    **uploads,
                    "additionalProperties": closed(
                        {
                            "upload_id": {"type": "string"},
                            "parts": {
                                "type": "array",
                                "items": closed(
                                    {"part_number": {"type": "integer"}, "etag": {"type": "string"}}
                                ),
                            },
                        }
                    ),
                }
            }
        ),
        "AttemptClaim": body({"worker": NAME, "host": NAME}, ("worker", "host")),
        "AttemptHeartbeat": body(
            {"progress": nullable({"type": "number", "minimum": 0, "maximum": 1})}
        ),
        "AttemptComplete": body({"outputs": uploads}, ("outputs",)),
        "AttemptFail": body(
            {"error": {"type": "string", "minLength": 1, "maxLength": MAX_ERROR_CHARS}},
            ("error",),
        ),
        "Lease": closed(LEASE_FIELDS),
        "Claimed": closed(
            {
                **LEASE_FIELDS,
                "job": ref("Job"),
                "source": closed(
                    {
                        "bucket": {"type": "string"},
                        "key": {"type": "string"},
                        "size_bytes": nullable(COUNT),
                    }
                ),
                "max_pixels": {"type": "integer", "minimum": 1},
            }
        ),
        "Worker": closed(
            {
                "id": {"type": "string"},
                "host": {"type": "string"},
                "running": COUNT,
                "completed": COUNT,
                "failed": COUNT,
                "last_seen": TIMESTAMP,
            }
        ),
        "WorkerList": closed({"workers": {"type": "array", "items": ref("Worker")}}),
    }
