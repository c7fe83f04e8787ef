"""Wire constants of the contract that client and server share, from ``service.common.wire``.

The one module both sides import: the server's HTTP layer takes the same names from
``service.common.wire``, so a header name or a bound cannot differ between them. Pure; safe from
any thread.
"""

from __future__ import annotations

from service.common.wire import *  # noqa: F403  (every name of the shared module, by its __all__)
from service.common.wire import __all__ as __all__
