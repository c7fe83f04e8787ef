"""Media derived from stored objects: image variants (and video work, in its own modules).

Media knows nothing of HTTP: it takes parameters that are already parsed, reads payloads
through the engine and the file-system seam, and raises its own errors, which the handlers
in ``service/http/`` translate into the contract's answers.

- ``image_params``: image parameters, parsed and validated; ``images``: the transform
  itself, bytes in and bytes out; pure apart from Pillow.
- ``image_cache``: derived variants on disk under ``<data_dir>/cache/images/``, bounded in
  size, written atomically, verified on every read.
- ``image_variants``: the async glue: cache lookup, one computation per variant at a time,
  admission against the memory budget (``image_budget``), and the render in a worker process
  (``image_pool``) that gives its memory back.
- ``video_input``: the one way a video source is opened (allowlisted containers, no nested
  protocols).
- ``video_*``: video thumbnails, packaging jobs (``video_runner`` runs them, each in a
  ``video_worker`` process; ``video_package`` is the PyAV encode/mux) and playback shares;
  each module's docstring says its part.

May import (docs/architecture.md, "Layers"): ``service``, ``fsseam``, ``service.common``,
``service.config``, ``service.meta``, ``service.auth``, ``service.engine``, ``service.ops``,
``service.multipart`` (the fleet's outputs are multipart uploads).
"""
