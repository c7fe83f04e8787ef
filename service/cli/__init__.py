"""``svc``: the command-line client, built on ``service.client`` only (no HTTP of its own).

Layout, one job per module:

- ``main``: the click group, the one place errors become a line and an exit code.
- ``app``: what every command gets: the output, the aliases, one client per alias.
- ``errors``: the exit codes and how an exception is told to the user.
- ``config``: aliases in ``~/.config/svc/config.json`` (mode 0600) and ``SVC_URL``.
- ``paths``: ``ALIAS/BUCKET/KEY`` versus a local path.
- ``output``: results as text, tables or one JSON document per line.
- ``sizes``: sizes and durations as people type and read them.
- ``sse``: the Server-Sent Events parser behind ``watch``; ``events``: the stream itself.
- ``transfer/``: ``cp``/``mv``/``mirror``: streamed walks, the merge-join plan, the worker
  pool, the two ends, multipart resume state and the progress display.
- ``commands/``: the commands, grouped by what they act on.
"""
