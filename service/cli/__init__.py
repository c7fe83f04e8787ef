"""``svc``: the command-line client, built on ``service.client`` only (no HTTP of its own).

Layout, one job per module:

- ``main``: the click group, the one place errors become a line and an exit code.
- ``app``: what every command gets: the output, the aliases, one client per alias.
- ``errors``: the exit codes and how an exception is told to the user.
- ``config``: aliases in ``~/.config/svc/config.json`` (mode 0600) and ``SVC_URL``.
- ``paths``: ``ALIAS/BUCKET/KEY`` versus a local path.
- ``output``: results as text, tables or one JSON document per line.
- ``sizes``: sizes and durations as people type and read them.
- ``transfer/``: ``cp``/``mv``/``mirror``: streamed walks, the merge-join plan, the worker
  pool, the two ends, multipart resume state and the progress display.
- ``commands/``: the commands, grouped by what they act on.

May import (docs/architecture.md, "Layers"): ``service.client``.
"""

import sys
import types


def _without_httpx_cli() -> None:
    """Keep ``import httpx`` from importing httpx's own command line.

    httpx's ``__init__`` imports ``httpx._main`` (click, rich and pygments) whenever they are
    installed, only to offer ``httpx.main``; for svc that was a sixth of its start-up, paid by
    every command. svc never calls it, so the module is stood in for by one whose ``main``
    says so. Only a process that imports ``service.cli`` is affected.
    """
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main", "httpx's CLI, not loaded by svc.")

    def main(*args: object, **kwargs: object) -> None:
        raise RuntimeError("httpx's command line is not loaded in a process that runs svc")

    stand_in.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in


_without_httpx_cli()
