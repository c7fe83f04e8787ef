"""``svc``: the command-line client, built on ``service.client`` only (no HTTP of its own).

Layout, one job per module:

- ``main``: the click group, the one place errors become a line and an exit code.
- ``errors``: the exit codes and how an exception is told to the user.
- ``config``: aliases in ``~/.config/svc/config.json`` (mode 0600) and ``SVC_URL``.
- ``paths``: ``ALIAS/BUCKET/KEY`` versus a local path.
- ``output``: results as text, tables or one JSON document per line.
- ``sizes``: sizes and durations as people type and read them.
- ``sse``: the Server-Sent Events parser behind ``watch``.
- ``transfer/``: ``cp``/``mirror``: streamed walks, the merge-join plan, the worker pool,
  multipart resume state and the progress display.
- ``commands/``: the commands, grouped by what they act on.
"""
