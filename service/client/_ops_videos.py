"""Flows for video thumbnails, packaging jobs and playback shares.

Each function builds one endpoint's request and parses its answer; ``wait_for_job`` polls
with ``Sleep`` steps, so it too is written once for both clients. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from service.client._documents import document
from service.client._exceptions import RequestTimeoutError
from service.client._flow import Call, Flow, Sleep, request
from service.client._models import Job, Object, Rendition, Share, parse
from service.client._paths import api, encode_segment

__all__ = [
    "cancel_job",
    "create_job",
    "create_share",
    "get_job",
    "list_jobs",
    "revoke_share",
    "thumbnail",
    "wait_for_job",
]


def thumbnail(
    bucket: str,
    key: str,
    *,
    at_seconds: float | None = None,
    width: int | None = None,
    format: str | None = None,
    quality: int | None = None,
    target_key: str | None = None,
) -> Flow[Object]:
    body = document(
        bucket=bucket,
        key=key,
        at_seconds=at_seconds,
        width=width,
        format=format,
        quality=quality,
        target_key=target_key,
    )
    reply = yield from request(Call("POST", api("/videos/thumbnails"), json=body))
    return parse(Object.from_json, reply.json())


def _rendition(value: Rendition | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, Rendition):
        return {"height": value.height, "video_bitrate_kbps": value.video_bitrate_kbps}
    return dict(value)


def create_job(
    bucket: str,
    key: str,
    *,
    formats: Sequence[str] = ("hls", "dash"),
    renditions: Sequence[Rendition | Mapping[str, Any]] | None = None,
    segment_seconds: float | None = None,
    hls_segment_type: str | None = None,
    output_prefix: str | None = None,
) -> Flow[Job]:
    if isinstance(formats, str):
        raise TypeError("formats is a list such as ['hls', 'dash']")
    body = document(
        bucket=bucket,
        key=key,
        formats=list(formats),
        renditions=[_rendition(item) for item in renditions] if renditions is not None else None,
        segment_seconds=segment_seconds,
        hls_segment_type=hls_segment_type,
        output_prefix=output_prefix,
    )
    reply = yield from request(Call("POST", api("/videos/jobs"), json=body))
    return parse(Job.from_json, reply.json())


def get_job(job_id: str) -> Flow[Job]:
    reply = yield from request(Call("GET", api(f"/videos/jobs/{encode_segment(job_id)}")))
    return parse(Job.from_json, reply.json())


def list_jobs(bucket: str | None = None, status: str | None = None) -> Flow[list[Job]]:
    params = document(bucket=bucket, status=status)
    reply = yield from request(Call("GET", api("/videos/jobs"), params=params))
    return parse(lambda doc: [Job.from_json(item) for item in doc["jobs"]], reply.json())


def cancel_job(job_id: str) -> Flow[None]:
    yield from request(Call("DELETE", api(f"/videos/jobs/{encode_segment(job_id)}")))


def wait_for_job(job_id: str, *, poll_interval: float, timeout: float | None) -> Flow[Job]:
    """Poll until the job is completed or failed; RequestTimeoutError after ``timeout``
    seconds of waiting (counted in poll intervals, so the flow needs no clock)."""
    if poll_interval <= 0:
        raise ValueError("poll_interval must be positive")
    waited = 0.0
    while True:
        job = yield from get_job(job_id)
        if job.finished:
            return job
        if timeout is not None and waited >= timeout:
            raise RequestTimeoutError(
                f"job {job_id} still {job.status} ({job.progress:.0%}) after {timeout} s"
            )
        yield Sleep(poll_interval)
        waited += poll_interval


def create_share(job_id: str, expires_in: int | None = None) -> Flow[Share]:
    body = document(job_id=job_id, expires_in=expires_in)
    reply = yield from request(Call("POST", api("/videos/shares"), json=body))
    return parse(Share.from_json, reply.json())


def revoke_share(share_id: str) -> Flow[None]:
    yield from request(Call("DELETE", api(f"/videos/shares/{encode_segment(share_id)}")))
