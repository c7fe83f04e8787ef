"""Leaves every layer may use: names, numbers, timestamps, header fields, wire constants and
the one error type of the contract.

May import: the standard library only (nothing else of ``service``). Pure functions and
constants; no I/O, no state.
"""
