"""User content never runs in the service's origin: the headers every object body carries.

The service's origin is the console's, and the console keeps an admin's token in the tab's
``sessionStorage``; a script of an uploaded page that ran there could read it. So every
object body (object GET and HEAD, presigned or not, share playback, image variants) is sent:

- with ``X-Content-Type-Options: nosniff``: the browser takes the stored type as it is and
  never guesses HTML or script from the bytes;
- with ``Content-Security-Policy: sandbox``: should the browser render it as a document, the
  document gets an opaque origin of its own (no storage, no same-origin API calls, no
  plugins, no forms, no script at all without ``allow-scripts``);
- and, for a type a browser would run (``is_active_type``), as a download:
  ``Content-Disposition: attachment`` with the key's last segment as its file name
  (``attachment_disposition``), so opening it in a tab never renders it.

Active types (docs/security.md "Served content"), compared on the media type's essence
(type/subtype, lowercased, parameters and spaces dropped):

- HTML: ``text/html``; XHTML: ``application/xhtml+xml``; SVG: ``image/svg+xml``;
- XML of any kind: ``text/xml``, ``application/xml``, ``text/xsl`` and every ``+xml`` suffix
  (RSS, Atom, MathML, XSLT, DASH manifests...): a browser renders XML documents, and those
  may embed XHTML with script or pull in an XSLT stylesheet;
- JavaScript: every JavaScript MIME type the WHATWG MIME Sniffing standard lists
  (``text/javascript``, ``application/javascript``, ``application/ecmascript``,
  ``text/jscript``, ``text/javascript1.0`` to ``1.5``...);
- ``multipart/x-mixed-replace``: Chromium renders each part as a document of its own type.

A stored value with a comma (which the contract refuses today, but an older version may have
stored) is active if any of its pieces is: browsers take the last valid one.

Pure; safe from any thread.
"""

from __future__ import annotations

from urllib.parse import quote

NOSNIFF = ("X-Content-Type-Options", "nosniff")
SANDBOX = ("Content-Security-Policy", "sandbox")
SANDBOX_HEADERS: tuple[tuple[str, str], ...] = (NOSNIFF, SANDBOX)
"""What every object body carries."""

ACTIVE_ESSENCES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/xml",
        "text/xsl",
        "multipart/x-mixed-replace",
        # JavaScript MIME types (WHATWG MIME Sniffing, section 4.6)
        "application/ecmascript",
        "application/javascript",
        "application/x-ecmascript",
        "application/x-javascript",
        "text/ecmascript",
        "text/javascript",
        "text/javascript1.0",
        "text/javascript1.1",
        "text/javascript1.2",
        "text/javascript1.3",
        "text/javascript1.4",
        "text/javascript1.5",
        "text/jscript",
        "text/livescript",
        "text/x-ecmascript",
        "text/x-javascript",
    }
)
FALLBACK_NAME = "download"
"""The file name of a key with no last segment (``folder/``)."""


def essence(media_type: str) -> str:
    """The type/subtype of a media type, lowercased, without parameters or spaces.

    >>> essence(" Text/HTML ; charset=UTF-8")
    'text/html'
    """
    return media_type.split(";", 1)[0].strip().strip('"').lower()


def is_active_type(content_type: str) -> bool:
    """Whether a browser would run (or render as a document) a body of this type.

    >>> is_active_type("image/svg+xml"), is_active_type("application/rss+xml; x=1")
    (True, True)
    >>> is_active_type("text/plain"), is_active_type("image/png"), is_active_type("text/xmlish")
    (False, False, False)
    """
    for piece in content_type.split(","):
        kind = essence(piece)
        if kind in ACTIVE_ESSENCES or kind.endswith("+xml"):
            return True
    return False


def attachment_disposition(key: str) -> str:
    """``Content-Disposition: attachment`` naming the key's last segment (RFC 6266): an ASCII
    ``filename`` (other characters, quotes and backslashes as ``_``) and, for the name as it
    is, an RFC 5987 ``filename*``.

    >>> attachment_disposition("reports/caf\\u00e9 \\"1\\".html")
    'attachment; filename="caf_ _1_.html"; filename*=UTF-8\\'\\'caf%C3%A9%20%221%22.html'
    >>> attachment_disposition("folder/")
    'attachment; filename="download"'
    """
    name = key.rsplit("/", 1)[-1] or FALLBACK_NAME
    fallback = "".join(
        char if 32 <= ord(char) < 127 and char not in '"\\' else "_" for char in name
    )
    value = f'attachment; filename="{fallback}"'
    if fallback != name or any(char in name for char in "%;,"):
        value += "; filename*=UTF-8''" + quote(name, safe="")
    return value


def served_headers(content_type: str, key: str) -> list[tuple[str, str]]:
    """The headers a body of ``content_type`` stored as ``key`` is sent with."""
    headers = list(SANDBOX_HEADERS)
    if is_active_type(content_type):
        headers.append(("Content-Disposition", attachment_disposition(key)))
    return headers
