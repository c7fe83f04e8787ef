"""``python -m service``: start the object storage server."""

from service.server import main

raise SystemExit(main())
