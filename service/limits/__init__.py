"""Admission limits shared by every request path: upload slots per user and in all.

May import: ``service.common`` and the standard library. Never HTTP.
"""
