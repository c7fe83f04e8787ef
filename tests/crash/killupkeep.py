"""The kill/restart workload's upkeep checks: webhooks deliver every acknowledged write, and
the scrub, running through the kills, finds nothing corrupt.

``KillKit`` starts a ``Receiver`` beside the server, configures ``webhook`` on each bucket,
notes the SHA-256 of every acknowledged write, and calls ``check_upkeep`` at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from tests.events.receiver import Receiver

WEBHOOK_SECRET = "kill-kit-webhook-secret"
WEBHOOK_DEADLINE = 60.0
"""Seconds the final check waits for the receiver to have every acknowledged write."""
UPKEEP_ENV = {
    "SERVICE_WEBHOOK_MAX_BACKOFF": "0.2",
    # The scrub runs pass after pass through the kills: it must never quarantine a payload
    # that a SIGKILL, an overwrite or a delete raced with (the disk check finds none).
    "SERVICE_SCRUB_INTERVAL_DAYS": "0.00002",
    "SERVICE_SCRUB_RATE_MBPS": "20",
}


def webhook(receiver: Receiver) -> dict[str, object]:
    """The notifications document of a bucket: one webhook to ``receiver``."""
    return {"webhooks": [{"id": "kit", "url": receiver.url, "secret": WEBHOOK_SECRET}]}


def check_upkeep(
    receiver: Receiver,
    acknowledged: set[str],
    client: httpx.Client,
    problem: Callable[[str], None],
) -> int:
    """Report what is wrong through ``problem``; return how many distinct events arrived.

    Every acknowledged write (by SHA-256) must arrive as an ``object.created``; each
    bucket's first deliveries must come in sequence order (a redelivery after a kill may
    repeat one); every delivery is signed; the scrub checked something and found nothing.
    """
    deadline = time.monotonic() + WEBHOOK_DEADLINE
    while True:
        got = receiver.received()
        created = {d.event["etag"] for d in got if d.event["type"] == "object.created"}
        missing = acknowledged - created
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if missing:
        problem(f"webhook: {len(missing)} acknowledged writes never delivered")
    seen: set[str] = set()
    last: dict[str, int] = {}
    for delivery in got:
        if not delivery.signed_with(WEBHOOK_SECRET):
            problem(f"webhook: bad signature on {delivery.event_id}")
        if delivery.event_id in seen:
            continue  # a redelivery after a kill (at least once)
        seen.add(delivery.event_id)
        event = delivery.event
        if event["sequence"] <= last.get(event["bucket"], 0):
            problem(f"webhook: {delivery.event_id} delivered out of sequence order")
        last[event["bucket"]] = event["sequence"]
    scrub = client.get("/system/scrub").json()
    if scrub["corrupt"] or not (scrub["objects_checked"] or scrub["finished_at"]):
        problem(f"scrub: {scrub['objects_checked']} checked, corrupt {scrub['corrupt']}")
    return len(seen)
