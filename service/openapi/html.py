"""The document as one readable HTML page, rendered on the server.

Self-contained: inline CSS, no script, nothing fetched from anywhere (the handler also
sends a Content-Security-Policy saying so). Operations are grouped by tag, each with its
parameters, request body and responses; schemas are named, and the JSON document holds them.

Pure: document in, text out.
"""

from __future__ import annotations

import html
from typing import Any

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;
color:#1d232b}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ccd;padding-bottom:.2rem;margin-top:2rem}
details{border:1px solid #dde;border-radius:6px;margin:.4rem 0;padding:.3rem .7rem}
summary{cursor:pointer}code{background:#f1f3f6;padding:0 .25rem;border-radius:3px}
.m{display:inline-block;min-width:4.2rem;font-weight:700;font-family:monospace}
table{border-collapse:collapse;margin:.4rem 0}td,th{border:1px solid #dde;padding:.2rem .5rem;
text-align:left;vertical-align:top}p{margin:.4rem 0}
"""
METHODS = ("get", "head", "post", "put", "patch", "delete")
BOUNDS = ("minimum", "maximum", "minLength", "maxLength", "pattern")


def _e(value: object) -> str:
    return html.escape(str(value))


def _name(schema: dict[str, Any] | None) -> str:
    """A short description of a schema, as HTML: a link to a named schema, an enum, or a
    type with its bounds."""
    if not schema:
        return ""
    if "$ref" in schema:
        name = _e(str(schema["$ref"]).rsplit("/", 1)[-1])
        return f'<a href="#schema-{name}">{name}</a>'
    if "enum" in schema:
        return _e(" | ".join(str(value) for value in schema["enum"]))
    if "anyOf" in schema:
        return " or ".join(_name(option) for option in schema["anyOf"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return "array of " + _name(schema.get("items"))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "object of " + _name(schema["additionalProperties"])
    bounds = [f"{k} {schema[k]}" for k in BOUNDS if k in schema]
    return _e(kind + (f" ({', '.join(bounds)})" if bounds else ""))


def _schema(name: str, schema: dict[str, Any]) -> str:
    """One named schema: its properties, which are required, and whether others may come."""
    out = [f'<h3 id="schema-{_e(name)}">{_e(name)}</h3>']
    if schema.get("description"):
        out.append(f"<p>{_e(schema['description'])}</p>")
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    if properties:
        out.append("<table><tr><th>field</th><th>schema</th><th></th></tr>")
        for field, sub in properties.items():
            mark = "required" if field in required else ""
            out.append(
                f"<tr><td><code>{_e(field)}</code></td><td>{_name(sub)}</td><td>{mark}</td></tr>"
            )
        out.append("</table>")
    if schema.get("additionalProperties") is False:
        out.append("<p>No other fields.</p>")
    return "\n".join(out)


def _resolve(document: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    ref = item.get("$ref")
    if not isinstance(ref, str):
        return item
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def _operation(document: dict[str, Any], path: str, method: str, op: dict[str, Any]) -> str:
    out = [
        f"<details><summary><span class=m>{method.upper()}</span> <code>{_e(path)}</code> "
        f"&mdash; {_e(op.get('summary', ''))}</summary>"
    ]
    if op.get("description"):
        out.append(f"<p>{_e(op['description'])}</p>")
    security = op.get("security") or []
    schemes = ", ".join(" + ".join(entry) for entry in security if entry) or "none (public)"
    out.append(f"<p>Credentials: {_e(schemes)}</p>")
    params = [_resolve(document, p) for p in op.get("parameters", [])]
    if params:
        out.append("<table><tr><th>parameter</th><th>in</th><th>schema</th><th></th></tr>")
        for p in params:
            required = " (required)" if p.get("required") else ""
            out.append(
                f"<tr><td><code>{_e(p['name'])}</code>{required}</td><td>{_e(p['in'])}</td>"
                f"<td>{_name(p.get('schema'))}</td><td>{_e(p.get('description', ''))}</td>"
                "</tr>"
            )
        out.append("</table>")
    body = op.get("requestBody")
    if body:
        kinds = ", ".join(
            f"{_e(media)} {_name(content.get('schema'))}"
            for media, content in body["content"].items()
        )
        out.append(f"<p>Body: <code>{kinds}</code></p>")
    out.append("<table><tr><th>status</th><th>answer</th><th>body</th></tr>")
    for status, response in op["responses"].items():
        response = _resolve(document, response)
        content = response.get("content", {})
        bodies = ", ".join(f"{_e(media)} {_name(c.get('schema'))}" for media, c in content.items())
        out.append(
            f"<tr><td>{_e(status)}</td><td>{_e(response.get('description', ''))}</td>"
            f"<td><code>{bodies}</code></td></tr>"
        )
    out.append("</table></details>")
    return "\n".join(out)


def render_html(document: dict[str, Any]) -> str:
    """The page for ``document``."""
    info = document["info"]
    sections: dict[str, list[str]] = {tag["name"]: [] for tag in document.get("tags", [])}
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                op = item[method]
                sections.setdefault(op["tags"][0], []).append(
                    _operation(document, path, method, op)
                )
    body = [
        f"<h1>{_e(info['title'])} API {_e(info['version'])}</h1>",
        '<p>The machine-readable document: <a href="openapi.json">openapi.json</a> '
        f"(OpenAPI {_e(document['openapi'])}).</p>",
        f"<p>{_e(info.get('description', ''))}</p>",
    ]
    for tag, operations in sections.items():
        body.append(f"<h2>{_e(tag)}</h2>")
        body.extend(operations)
    body.append("<h2>schemas</h2>")
    for name, schema in document["components"]["schemas"].items():
        body.append(_schema(name, schema))
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{_e(info['title'])} API</title><style>{STYLE}</style></head><body>"
        + "\n".join(body)
        + "</body></html>"
    )
