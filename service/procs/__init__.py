"""Serving processes: one writer and ``SERVICE_WORKERS - 1`` workers sharing the port.

``supervisor`` (the parent) forks the roles; ``writer_service`` is the writer's side of the
local socket its workers commit through, ``writer_link`` the workers' side, ``wire`` the frames
between them and ``worker_engine`` the engine of a worker (reads the shared index, commits
through the link). See docs/architecture.md, "Processes".
"""
