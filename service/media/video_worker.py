"""The packaging worker process: ``python -m service.media.video_worker``.

Why a process and not a thread: packaging decodes and encodes a whole video, so it must
stay off the server's event loop and its GIL, it can be cancelled at once (the runner
kills the process; a thread could not be stopped inside FFmpeg), and a crash inside FFmpeg
takes down only this process and fails only this job.

Protocol (``service.media.video_runner`` speaks the other side): one JSON document on stdin

    {"source": "/dev/fd/<n>", "out_dir": "<scratch dir>", "params": JobParams document,
     "max_pixels": int}

then JSON lines on stdout: ``{"progress": 0..1}`` now and then, and finally exactly one of
``{"outputs": {"hls"|"dash": name}}`` or ``{"error": "<message for the job>"}``. The source
is a descriptor the runner opened through the file-system seam and passed down, so the
payload stays readable even if its object is overwritten or deleted meanwhile. A worker
that exits without a final line crashed.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from service.media.video_errors import VideoError
from service.media.video_package import PackageRequest, package
from service.media.video_params import JobParams


def _say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Package what ``spec`` describes; the final message (outputs or error)."""
    params = JobParams.from_document(spec["params"])
    request = PackageRequest(
        formats=params.formats,
        renditions=params.renditions,
        segment_seconds=params.segment_seconds,
        hls_segment_type=params.hls_segment_type,
        max_pixels=int(spec["max_pixels"]),
    )
    try:
        outputs = package(
            spec["source"],
            spec["out_dir"],
            request,
            lambda fraction: _say({"progress": round(fraction, 4)}),
        )
    except VideoError as exc:
        return {"error": str(exc)}
    except OSError as exc:
        return {"error": f"writing the outputs failed: {exc.strerror or exc}"}
    return {"outputs": outputs}


def main() -> int:
    try:
        _say(run(json.loads(sys.stdin.read())))
    except BrokenPipeError:
        return 1  # the server went away: nobody is waiting for the result
    except Exception as exc:
        traceback.print_exc()
        _say({"error": f"packaging failed: {type(exc).__name__}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
