"""fsseam: the one file-system seam that every file operation of the server goes through.

``fs`` defines the ``FileSystem`` protocol and ``RealFileSystem`` (plain ``os`` calls, the
Linux extras such as ``sync_file_range`` through ctypes); ``simfs`` is its crash-testing
double, a simulated disk that can drop everything not yet fsynced (power loss) or fail a
chosen call; ``crashpoints`` names the places a crash harness can stop the process.

Both ``journal/`` and ``service/`` (storage, auth files, media scratch) use it, which is why
it is a package of its own: ``journal`` stays free of ``service`` and the seam belongs to
neither. It imports nothing of ours.

May import: nothing of ours (docs/architecture.md, "Layers").
"""

from fsseam.fs import FileSystem, RealFileSystem

__all__ = ["FileSystem", "RealFileSystem"]
