"""Object events (the contract's "Events and notifications"): derived from the committed
journal records (``feed``) and kept in segment files for readers to resume from (``log``);
the targets webhooks may be delivered to are checked against SSRF (``targets``). Delivery to
webhooks is background work of the journal owner (``service.upkeep.webhooks``).

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service.common``,
``service.meta``.

Never the engine (it feeds the event feed) and never HTTP.
"""
