"""Wire constants of the contract that client and server share, from ``service.wire``.

The one module both sides import: the server's HTTP layer takes the same names from
``service.wire``, so a header name or a bound cannot differ between them. Pure; safe from
any thread.
"""

from __future__ import annotations

from service.wire import *  # noqa: F403  (every name of the shared module, by its __all__)
from service.wire import __all__ as __all__
