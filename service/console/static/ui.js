// Small DOM helpers shared by every view: element builder, dialogs, toasts, formatting.
// No framework: h() builds elements, views replace the content of <main>.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    // Styles through the CSSOM: the page's policy (style-src 'self') refuses style attributes.
    else if (name === "style") Object.assign(el.style, value);
    else if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "value" || name === "checked" || name === "selected") el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let fieldIds = 0;

/** A labelled form field: the label's `for` names the control, so tests find it by label. */
export function field(label, control, hint) {
  if (!control.id) control.id = `field-${++fieldIds}`;
  const hintEl = hint ? h("p", { class: "hint", id: `${control.id}-hint`, text: hint }) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: control.id, text: label }), control, hintEl);
}

export function button(label, onClick, { kind = "secondary", icon, title, type = "button" } = {}) {
  return h(
    "button",
    { type, class: `btn btn-${kind}`, onclick: onClick, title },
    icon ? h("span", { class: "icon", "aria-hidden": "true", text: icon }) : null,
    h("span", { text: label }),
  );
}

/** A modal dialog; resolves with the value passed to close(), or null when dismissed. */
export function openDialog(title, build, { wide = false } = {}) {
  return new Promise((resolve) => {
    const dlg = h("dialog", { class: wide ? "dialog wide" : "dialog", "aria-label": title });
    let result = null;
    const close = (value = null) => {
      result = value;
      dlg.close();
    };
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(result);
    });
    const body = build(close);
    append(dlg, [
      h("header", { class: "dialog-head" },
        h("h2", { text: title }),
        h("button", { type: "button", class: "btn btn-icon", "aria-label": "Close dialog",
          onclick: () => close(null), text: "✕" })),
      body,
    ]);
    document.body.append(dlg);
    dlg.showModal();
    const first = dlg.querySelector("input, select, textarea, .btn-primary");
    if (first) first.focus();
  });
}

/** Asks to confirm; resolves true or false. */
export function confirmDialog(title, message, confirmLabel = "Delete") {
  return openDialog(title, (close) => h("div", { class: "dialog-body" },
    h("p", { text: message }),
    h("div", { class: "actions" },
      button("Cancel", () => close(false)),
      button(confirmLabel, () => close(true), { kind: "danger" })),
  )).then((value) => value === true);
}

/** A dialog with a form: `fields` builds the controls, `submit(form)` returns the result
 * or throws; its error is shown inside the dialog, which stays open. */
export function formDialog(title, fields, submit, submitLabel = "Save") {
  return openDialog(title, (close) => {
    const error = h("p", { class: "form-error", role: "alert" });
    const form = h("form", { class: "dialog-body", novalidate: true },
      fields(), error,
      h("div", { class: "actions" },
        button("Cancel", () => close(null)),
        button(submitLabel, null, { kind: "primary", type: "submit" })));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.textContent = "";
      const submitButton = form.querySelector("button[type=submit]");
      submitButton.disabled = true;
      try {
        close(await submit(form));
      } catch (err) {
        error.textContent = err.message;
      } finally {
        submitButton.disabled = false;
      }
    });
    return form;
  });
}

/** A read-only value with a Copy button (links, secrets). */
export function copyable(label, value) {
  const input = h("input", { type: "text", readonly: true, value, class: "mono" });
  return h("div", { class: "copyable" }, field(label, input),
    button(`Copy ${label.toLowerCase()}`, async () => {
      input.select();
      try {
        await navigator.clipboard.writeText(value);
        toast("Copied to the clipboard");
      } catch {
        document.execCommand("copy");
      }
    }, { icon: "⧉" }));
}

/** A short note; it goes after a few seconds, or, given `until` (a promise), when that settles. */
export function toast(message, kind = "info", { until } = {}) {
  const region = document.getElementById("toasts");
  const item = h("div", { class: `toast toast-${kind}`, text: message });
  region.append(item);
  if (until) until.finally(() => item.remove());
  else setTimeout(() => item.remove(), kind === "error" ? 8000 : 4000);
  return item;
}

export function spinner(label = "Loading") {
  return h("div", { class: "loading", role: "status" }, h("span", { class: "spin", "aria-hidden": "true" }), label + "…");
}

export function emptyState(title, text, action) {
  return h("div", { class: "empty" }, h("p", { class: "empty-title", text: title }),
    text ? h("p", { text }) : null, action || null);
}

export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = Number(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function formatDate(value) {
  if (!value) return "—";
  const date = new Date(value);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function formatDuration(seconds) {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${hr} h`;
  if (hr) return `${hr} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

/** A <select> of link lifetimes; value in seconds (the contract allows 1 s to 7 days). */
export function expiryPicker(label = "Expires after", initial = 3600) {
  const choices = [[900, "15 minutes"], [3600, "1 hour"], [21600, "6 hours"], [86400, "1 day"],
    [259200, "3 days"], [604800, "7 days"]];
  const select = h("select", {},
    choices.map(([seconds, text]) => h("option", { value: String(seconds), text, selected: seconds === initial })));
  return { select, element: field(label, select) };
}

export function badge(text, kind = "neutral") {
  return h("span", { class: `badge badge-${kind}`, text });
}

export function progressBar(label, value = 0) {
  return h("progress", { max: "1", value: String(value), "aria-label": label });
}

export function navigate(path) {
  location.hash = "#" + path;
}

/** The console link of a bucket's folder, an object, or a bucket's settings. */
export function folderHref(bucket, prefix = "") {
  return `#/buckets/${encodeURIComponent(bucket)}` + (prefix ? `?prefix=${encodeURIComponent(prefix)}` : "");
}

export function objectHref(bucket, key) {
  return `#/buckets/${encodeURIComponent(bucket)}/object?key=${encodeURIComponent(key)}`;
}
