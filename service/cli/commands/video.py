"""``svc video thumbnail|package|status|jobs|cancel|share``: the server's video features."""

from __future__ import annotations

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_ERROR, EXIT_USAGE, CliError, about
from service.cli.paths import require_remote
from service.cli.sizes import parse_duration
from service.client import Job

__all__ = ["commands"]


@click.group(name="video")
def video_group() -> None:
    """Thumbnails, HLS/DASH packaging jobs and playback shares of stored videos."""


def _job_line(job: Job) -> str:
    outputs = " ".join(f"{kind}={key}" for kind, key in sorted(job.outputs.items()))
    where = f"attempt {job.attempts}" + (f" on {job.worker}" if job.worker else "")
    return (
        f"{job.job_id}\t{job.status}\t{job.progress:.0%}\t{where}\t{job.bucket}/{job.key}"
        f"\t{outputs}"
    )


@video_group.command(name="thumbnail")
@click.argument("path")
@click.option("--at", "at_seconds", type=float, help="Seconds into the video (default 1).")
@click.option("--width", type=click.IntRange(1, 10_000))
@click.option("--format", "image_format", type=click.Choice(["jpeg", "webp"]))
@click.option("--target", "target_key", metavar="KEY", help="Key of the stored still frame.")
@pass_app
def thumbnail(
    app: App,
    path: str,
    at_seconds: float | None,
    width: int | None,
    image_format: str | None,
    target_key: str | None,
) -> None:
    """Store a still frame of video ALIAS/BUCKET/KEY as an object.

    \b
    Examples:
      svc video thumbnail local/videos/talk.mp4
      svc video thumbnail --at 12.5 --width 320 --format webp local/videos/talk.mp4
    """
    remote = require_remote(path, app.aliases, key=True)
    with about(path):
        obj = app.client(remote.alias).videos.thumbnail(
            remote.bucket,
            remote.key,
            at_seconds=at_seconds,
            width=width,
            format=image_format,
            target_key=target_key,
        )
    app.output.result(obj, f"{remote.alias}/{obj.bucket}/{obj.key}")


@video_group.command(name="package")
@click.argument("path")
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(["hls", "dash"]),
    help="Output format (repeatable; default both).",
)
@click.option("--segment-seconds", type=float)
@click.option("--output-prefix", metavar="PREFIX")
@click.option("--wait", is_flag=True, help="Wait until the job completed or failed.")
@pass_app
def package(
    app: App,
    path: str,
    formats: tuple[str, ...],
    segment_seconds: float | None,
    output_prefix: str | None,
    wait: bool,
) -> int:
    """Start an HLS/DASH packaging job for video ALIAS/BUCKET/KEY; prints the job id.

    \b
    Examples:
      svc video package local/videos/talk.mp4
      svc video package --format hls --wait local/videos/talk.mp4
    """
    remote = require_remote(path, app.aliases, key=True)
    videos = app.client(remote.alias).videos
    with about(path):
        job = videos.create_job(
            remote.bucket,
            remote.key,
            formats=formats or ("hls", "dash"),
            segment_seconds=segment_seconds,
            output_prefix=output_prefix,
        )
        if wait:
            job = videos.wait_for_job(job.job_id, timeout=None)
    app.output.result(job, _job_line(job))
    return EXIT_ERROR if job.status == "failed" else 0


@video_group.command(name="status")
@click.argument("alias")
@click.argument("job_id")
@pass_app
def status(app: App, alias: str, job_id: str) -> None:
    """Show packaging job JOB_ID on server ALIAS.

    \b
    Example:
      svc video status local 3f2a...
    """
    with about(job_id):
        job = app.client(_alias(app, alias)).videos.get_job(job_id)
    app.output.result(job, _job_line(job))


@video_group.command(name="jobs")
@click.argument("path")
@click.option(
    "--status", "job_status", type=click.Choice(["queued", "processing", "completed", "failed"])
)
@pass_app
def jobs(app: App, path: str, job_status: str | None) -> None:
    """List packaging jobs of ALIAS (or of ALIAS/BUCKET).

    \b
    Example:
      svc video jobs local/videos --status failed
    """
    remote = require_remote(path, app.aliases, bucket=False)
    with about(path):
        found = app.client(remote.alias).videos.list_jobs(
            bucket=remote.bucket or None, status=job_status
        )
    for job in found:
        app.output.result(job, _job_line(job))


@video_group.command(name="cancel")
@click.argument("alias")
@click.argument("job_id")
@pass_app
def cancel(app: App, alias: str, job_id: str) -> None:
    """Cancel job JOB_ID on ALIAS and remove its outputs."""
    with about(job_id):
        app.client(_alias(app, alias)).videos.cancel_job(job_id)
    app.output.result({"status": "cancelled", "job_id": job_id}, f"Cancelled `{job_id}`.")


@video_group.command(name="share")
@click.argument("alias")
@click.argument("job_id")
@click.option("--expire", default="1h", show_default=True, help="Lifetime, e.g. 15m, 12h, 7d.")
@pass_app
def share(app: App, alias: str, job_id: str, expire: str) -> None:
    """Playback URLs (HLS, DASH) of completed job JOB_ID that need no credentials.

    \b
    Example:
      svc video share local 3f2a... --expire 12h
    """
    with about(job_id):
        made = app.client(_alias(app, alias)).videos.create_share(
            job_id, expires_in=parse_duration(expire)
        )
    lines = [url for url in (made.hls_url, made.dash_url) if url]
    app.output.result(made, "\n".join(lines) or made.share_id)


def _alias(app: App, name: str) -> str:
    name = name.rstrip("/")
    if not app.aliases.has(name):
        raise CliError(name, "NoSuchAlias (add it with `svc alias set`)", EXIT_USAGE)
    return name


def commands() -> list[click.Command]:
    return [video_group]
