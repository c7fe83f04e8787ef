"""Admission limits shared by every request path: per-user caps that wait for a slot, fairly
(``fair_slots``), and the upload slots built on them (``upload_slots``).

May import: ``service.common`` and the standard library. Never HTTP.
"""
