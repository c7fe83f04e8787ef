"""Admission: what a request may start, and how many at once, whichever path it takes.

- ``fair_slots``: per-user caps that wait for a slot, fairly, then refuse (429).
- ``upload_slots``: bodies streaming now, per user and in all, and the watchdog's rates.
- ``caps``: per-user caps on what a user may accumulate (access keys, open uploads), the
  creations still in flight, and case-insensitive usernames.
- ``cors``: which origins may call the API from a browser, and the answers to preflights.
- ``open_streams``: the event streams open now, which a graceful stop ends first.

Kept below ``service.http`` so that the shared context (``service.context``) needs nothing of
HTTP. May import: ``service.common``, ``service.meta`` and the standard library. Never HTTP.

May import (docs/architecture.md, "Layers"): ``service.common``, ``service.meta``.
"""
