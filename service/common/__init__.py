"""Leaves every layer may use: names, numbers, timestamps, header fields, wire constants and
the one error type of the contract.

May import: nothing of ours (docs/architecture.md, "Layers").

Pure functions and constants; no I/O, no state.
"""
