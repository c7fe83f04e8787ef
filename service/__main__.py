"""``python -m service``: start the object storage server; ``python -m service restore`` and
``python -m service archive verify`` are the archive's tools (``service.archive.cli``)."""

import sys

if sys.argv[1:2] and sys.argv[1] in ("restore", "archive"):
    from service.archive.cli import main as archive_main

    raise SystemExit(archive_main(sys.argv[1:]))

from service.server import main

raise SystemExit(main())
