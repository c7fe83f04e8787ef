"""The errors of the video modules, apart from HTTP.

::

    VideoError
     ├── VideoParamsError        a request parameter is out of range   -> 400 InvalidArgument
     ├── UndecodableVideoError   the source is not a video we can read  -> 415 (thumbnails),
     │                                                                     a failed job (jobs)
     └── VideoTooLargeError      a frame has more pixels than allowed   -> 413 EntityTooLarge

The media modules raise these; ``service/http/videos.py`` turns them into the contract's
answers, and the job runner turns them into a failed job's ``error``. Messages are shown to
clients: they name the problem, never a file path.

Thread-safety: plain exception classes.
"""

from __future__ import annotations


class VideoError(Exception):
    """Base of the video errors; ``str(error)`` is the client-facing message."""


class VideoParamsError(VideoError):
    """A parameter of a thumbnail or job request is missing, mistyped or out of range."""


class UndecodableVideoError(VideoError):
    """The source could not be opened or decoded as a video (or has no video stream)."""


class VideoTooLargeError(VideoError):
    """The source's frames are larger than ``image_max_pixels``: refused before decoding."""
