"""Object events (the contract's "Events and notifications"): derived from the committed
journal records (``feed``), kept in segment files for readers to resume from (``log``), and
delivered to webhooks (``webhooks``) whose targets are checked against SSRF (``targets``).

May import: ``fsseam``, ``service.common``, ``service.meta``; ``webhooks`` also the engine.
Never HTTP.
"""
