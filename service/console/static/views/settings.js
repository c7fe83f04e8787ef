// A bucket's settings: versioning, quota and tags (PATCH), lifecycle rules (their own
// endpoint), and deletion.
//
// Lifecycle rules are built against the contract (PUT/GET/DELETE .../lifecycle). A server
// that does not have that endpoint answers 404 or 405; the section then says so plainly
// instead of offering a form that cannot work.

import { api, bucketPath, ApiError } from "../api.js";
import {
  h, replace, field, button, toast, spinner, formatBytes, navigate, folderHref,
} from "../ui.js";
import { quotaControls, deleteBucket } from "./buckets.js";

export const LIFECYCLE_UNAVAILABLE =
  "Lifecycle rules are not available on this server: it does not offer the lifecycle endpoint yet.";

function section(title, description, ...content) {
  const id = `section-${title.toLowerCase().replace(/\W+/g, "-")}`;
  return h("section", { class: "card", "aria-labelledby": id },
    h("h2", { id, text: title }), description ? h("p", { class: "muted", text: description }) : null, ...content);
}

function tagEditor(tags) {
  const rows = h("div", { class: "tag-rows" });
  const addRow = (name = "", value = "") => {
    const index = rows.children.length + 1;
    const nameInput = h("input", { type: "text", value: name, "aria-label": `Tag ${index} name`, placeholder: "name" });
    const valueInput = h("input", { type: "text", value, "aria-label": `Tag ${index} value`, placeholder: "value" });
    const row = h("div", { class: "tag-row" }, nameInput, valueInput,
      h("button", { type: "button", class: "btn btn-icon", "aria-label": `Remove tag ${index}`, text: "✕",
        onclick: () => row.remove() }));
    rows.append(row);
  };
  for (const [name, value] of Object.entries(tags || {})) addRow(name, value);
  const read = () => {
    const out = {};
    for (const row of rows.children) {
      const [nameInput, valueInput] = row.querySelectorAll("input");
      const name = nameInput.value.trim();
      if (!name && !valueInput.value) continue;
      if (!name) throw new Error("Every tag needs a name.");
      out[name] = valueInput.value;
    }
    return out;
  };
  return { element: h("div", {}, rows, button("Add tag", () => addRow(), { icon: "+" })), read };
}

function ruleRow(rule, index, rows) {
  const number = (label, value) => h("input", { type: "number", min: "0", step: "any", value: value ?? "",
    "aria-label": `Rule ${index}: ${label}` });
  const inputs = {
    id: h("input", { type: "text", value: rule.id || "", "aria-label": `Rule ${index}: id` }),
    prefix: h("input", { type: "text", value: rule.prefix || "", "aria-label": `Rule ${index}: prefix`, placeholder: "all objects" }),
    enabled: h("input", { type: "checkbox", checked: rule.enabled !== false, "aria-label": `Rule ${index}: enabled` }),
    expire: number("expire current versions after days", rule.expire_after_days),
    noncurrent: number("remove noncurrent versions after days", rule.noncurrent_expire_after_days),
    abort: number("abort multipart uploads after days", rule.abort_multipart_after_days),
  };
  const row = h("tr", {},
    h("td", { "data-label": "Id" }, inputs.id), h("td", { "data-label": "Prefix" }, inputs.prefix),
    h("td", { "data-label": "Enabled" }, inputs.enabled), h("td", { "data-label": "Expire (days)" }, inputs.expire),
    h("td", { "data-label": "Noncurrent (days)" }, inputs.noncurrent), h("td", { "data-label": "Abort uploads (days)" }, inputs.abort),
    h("td", {}, h("button", { type: "button", class: "btn btn-icon", "aria-label": `Remove rule ${index}`, text: "✕",
      onclick: () => row.remove() })));
  row.read = () => {
    const out = { id: inputs.id.value.trim(), prefix: inputs.prefix.value, enabled: inputs.enabled.checked };
    if (!out.id) throw new Error(`Rule ${index} needs an id.`);
    for (const [name, input] of [["expire_after_days", inputs.expire],
      ["noncurrent_expire_after_days", inputs.noncurrent], ["abort_multipart_after_days", inputs.abort]]) {
      if (input.value !== "") out[name] = Number(input.value);
    }
    if (Object.keys(out).length === 3) throw new Error(`Rule ${out.id} needs at least one action (a number of days).`);
    return out;
  };
  rows.append(row);
}

function lifecycleSection(bucket) {
  const content = h("div", {}, spinner("Loading lifecycle rules"));
  const unavailable = (err) => err instanceof ApiError && (err.status === 405 ||
    (err.status === 404 && err.code !== "NoSuchBucket"));
  const render = (rules) => {
    const rows = h("tbody", {});
    rules.forEach((rule, i) => ruleRow(rule, i + 1, rows));
    const status = h("p", { role: "status", class: "muted" });
    replace(content,
      h("div", { class: "table-wrap" }, h("table", { class: "table compact" },
        h("thead", {}, h("tr", {}, ["Id", "Prefix", "Enabled", "Expire (days)", "Noncurrent (days)", "Abort uploads (days)", ""]
          .map((t) => h("th", { scope: "col", text: t })))), rows)),
      h("div", { class: "actions left" },
        button("Add rule", () => ruleRow({ enabled: true }, rows.children.length + 1, rows), { icon: "+" }),
        button("Save lifecycle rules", async () => {
          try {
            const list = [...rows.children].map((row) => row.read());
            if (list.length) await api("PUT", bucketPath(bucket, "/lifecycle"), { json: { rules: list } });
            else await api("DELETE", bucketPath(bucket, "/lifecycle"));
            status.textContent = "Lifecycle rules saved.";
            toast("Lifecycle rules saved");
          } catch (err) {
            status.textContent = unavailable(err) ? LIFECYCLE_UNAVAILABLE : `Not saved: ${err.message}`;
            status.className = "form-error";
          }
        }, { kind: "primary" })),
      status);
  };
  api("GET", bucketPath(bucket, "/lifecycle"))
    .then((body) => render(body.rules || []))
    .catch((err) => replace(content, h("p", { class: unavailable(err) ? "notice" : "form-error", role: "status",
      text: unavailable(err) ? LIFECYCLE_UNAVAILABLE : `Could not read the rules: ${err.message}` })));
  return section("Lifecycle rules", "Expire objects, old versions and abandoned uploads after a number of days.", content);
}

export function bucketSettingsView(name) {
  const body = h("div", { class: "stack" }, spinner("Loading settings"));
  const page = h("section", { class: "page" },
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" },
      h("a", { href: "#/buckets", text: "Buckets" }), h("span", { "aria-hidden": "true", text: "/" }),
      h("a", { href: folderHref(name), text: name }), h("span", { "aria-hidden": "true", text: "/" }),
      h("span", { "aria-current": "page", text: "Settings" })),
    h("div", { class: "page-head" }, h("h1", { text: `Settings of ${name}` })),
    body);
  api("GET", bucketPath(name)).then((bucket) => {
    const versioning = h("input", { type: "checkbox", checked: bucket.versioning_enabled, id: "versioning" });
    const quota = quotaControls(bucket.quota_bytes);
    const tags = tagEditor(bucket.tags);
    const status = h("p", { role: "status", class: "muted" });
    const save = async () => {
      status.className = "muted";
      try {
        const updated = await api("PATCH", bucketPath(name), { json: {
          versioning_enabled: versioning.checked, quota_bytes: quota.value(), tags: tags.read(),
        } });
        status.textContent = `Saved. Versioning is ${updated.versioning_enabled ? "on" : "off"}.`;
        toast("Bucket settings saved");
      } catch (err) {
        status.className = "form-error";
        status.textContent = `Not saved: ${err.message}`;
      }
    };
    replace(body,
      h("div", { class: "stats" },
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Objects" }), h("span", { class: "stat-value", text: bucket.usage.object_count.toLocaleString() })),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Stored" }), h("span", { class: "stat-value", text: formatBytes(bucket.usage.size_bytes) })),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Owner" }), h("span", { class: "stat-value small mono", text: bucket.owner }))),
      section("General", null,
        h("div", { class: "field checkbox" }, versioning, h("label", { for: "versioning", text: "Versioning: keep every version of objects" })),
        quota.element,
        h("h3", { text: "Tags" }), tags.element,
        h("div", { class: "actions left" }, button("Save settings", save, { kind: "primary" })), status),
      lifecycleSection(name),
      section("Delete bucket", "Deleting a bucket removes every object and version in it.",
        button(`Delete bucket ${name}`, async () => {
          try {
            if (await deleteBucket(bucket)) navigate("/buckets");
          } catch (err) {
            toast(err.message, "error");
          }
        }, { kind: "danger" })));
  }).catch((err) => replace(body, h("p", { class: "form-error", role: "alert", text: `Could not load the bucket: ${err.message}` })));
  return page;
}
