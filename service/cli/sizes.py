"""Sizes and durations as people type them (``10MiB``, ``7d``) and read them (``4.0 KiB``).

Pure functions; each raises ``CliError`` (exit 2) naming the bad text.
"""

from __future__ import annotations

import re

from service.cli.errors import EXIT_USAGE, CliError

__all__ = ["format_size", "parse_duration", "parse_size"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER = r"(\d{1,15}(?:\.\d{1,6})?)"


def parse_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional unit (decimal k/M/G/T or binary KiB...).

    >>> parse_size("4096"), parse_size("1.5k"), parse_size("10MiB")
    (4096, 1500, 10485760)
    """
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-z]*)", text.strip())
    if not match or match[2].lower() not in _UNITS:
        raise CliError(text, "not a size (examples: 4096, 10k, 5MiB, 1G)", EXIT_USAGE)
    return int(float(match[1]) * _UNITS[match[2].lower()])


def parse_duration(text: str) -> int:
    """Seconds in ``text``: a number with an optional unit s/m/h/d/w (plain = seconds).

    >>> parse_duration("90"), parse_duration("15m"), parse_duration("7d")
    (90, 900, 604800)
    """
    match = re.fullmatch(_NUMBER + r"\s*([smhdw]?)", text.strip().lower())
    if not match:
        raise CliError(text, "not a duration (examples: 3600, 15m, 12h, 7d)", EXIT_USAGE)
    return int(float(match[1]) * _SECONDS[match[2]])


def format_size(size: float) -> str:
    """Binary units, one decimal.

    >>> format_size(0), format_size(4096), format_size(1536 * 1024**2)
    ('0 B', '4.0 KiB', '1.5 GiB')
    """
    if size < 1024:
        return f"{int(size)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.1f} {unit}"
