// The bucket list: every bucket the signed-in user may see (its own; all for an admin),
// with usage against quota, and creation and deletion.

import { api, bucketPath, session } from "../api.js";
import {
  h, replace, field, button, formDialog, confirmDialog, toast, spinner, emptyState, badge,
  formatBytes, formatDate, navigate, folderHref,
} from "../ui.js";

const BUCKET_NAME = /^(?!\d+\.\d+\.\d+\.\d+$)(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export function bucketNameProblem(name) {
  if (!name) return "Enter a bucket name.";
  if (!BUCKET_NAME.test(name)) {
    return "Use 3 to 63 lowercase letters, digits, dots or hyphens, starting and ending with a letter or digit.";
  }
  return "";
}

let quotaFields = 0;

/** Bytes from a number and a unit select (quota fields). */
export function quotaControls(bytes) {
  const units = [["MiB", 2 ** 20], ["GiB", 2 ** 30], ["TiB", 2 ** 40]];
  let unit = units[1];
  if (bytes) unit = [...units].reverse().find(([, size]) => bytes % size === 0) || units[0];
  const amount = h("input", { type: "number", min: "0", step: "any", inputmode: "decimal",
    value: bytes ? String(bytes / unit[1]) : "", placeholder: "No quota" });
  const select = h("select", { "aria-label": "Quota unit" },
    units.map(([name, size]) => h("option", { value: String(size), text: name, selected: name === unit[0] })));
  amount.id = `quota-${++quotaFields}`;
  const element = h("div", { class: "field" }, h("label", { for: amount.id, text: "Quota" }),
    h("div", { class: "inline" }, amount, select),
    h("p", { class: "hint", text: "Leave empty for no quota. Every stored version counts." }));
  const value = () => {
    if (amount.value.trim() === "") return null;
    const number = Number(amount.value);
    if (!Number.isFinite(number) || number < 0) throw new Error("The quota must be a positive number.");
    return Math.round(number * Number(select.value));
  };
  return { element, value };
}

function usageCell(bucket) {
  const used = bucket.usage.size_bytes;
  if (!bucket.quota_bytes) return h("td", { "data-label": "Size" }, formatBytes(used));
  const share = Math.min(1, used / bucket.quota_bytes);
  return h("td", { "data-label": "Size" },
    h("div", { class: "usage" },
      h("span", { text: `${formatBytes(used)} of ${formatBytes(bucket.quota_bytes)}` }),
      h("meter", { min: "0", max: "1", low: "0.7", high: "0.9", optimum: "0", value: String(share),
        "aria-label": `Quota used by ${bucket.name}` })));
}

export async function createBucketDialog() {
  const name = h("input", { type: "text", name: "name", autocomplete: "off", spellcheck: "false" });
  const versioning = h("input", { type: "checkbox", name: "versioning", id: "new-versioning" });
  const quota = quotaControls(null);
  const created = await formDialog("Create bucket", () => [
    field("Bucket name", name, "Lowercase letters, digits, dots and hyphens; 3 to 63 characters."),
    h("div", { class: "field checkbox" }, versioning, h("label", { for: versioning.id, text: "Keep every version of objects (versioning)" })),
    quota.element,
  ], async () => {
    const problem = bucketNameProblem(name.value.trim());
    if (problem) throw new Error(problem);
    return api("POST", "/buckets", { json: {
      name: name.value.trim(), versioning_enabled: versioning.checked, quota_bytes: quota.value() ?? undefined,
    } });
  }, "Create bucket");
  if (created) toast(`Bucket ${created.name} created`);
  return created;
}

export async function deleteBucket(bucket) {
  const empty = bucket.usage.object_count === 0;
  const confirmed = await confirmDialog("Delete bucket",
    empty ? `Delete the empty bucket ${bucket.name}?`
      : `Delete ${bucket.name} and all of its ${bucket.usage.object_count} stored objects and versions? This cannot be undone.`,
    "Delete bucket");
  if (!confirmed) return false;
  await api("DELETE", bucketPath(bucket.name), { query: { force: empty ? undefined : "true" } });
  toast(`Bucket ${bucket.name} deleted`);
  return true;
}

export function bucketsView() {
  const body = h("div", {}, spinner("Loading buckets"));
  const create = button("Create bucket", async () => {
    const created = await createBucketDialog();
    if (created) navigate(`/buckets/${encodeURIComponent(created.name)}`);
  }, { kind: "primary", icon: "+" });
  const page = h("section", { class: "page" },
    h("div", { class: "page-head" },
      h("div", {}, h("h1", { text: "Buckets" }),
        h("p", { class: "muted", text: session.isAdmin ? "Every bucket on this server." : "The buckets you own." })),
      create),
    body);
  const load = async () => {
    try {
      const { buckets } = await api("GET", "/buckets");
      if (!buckets.length) {
        replace(body, emptyState("No buckets yet", "A bucket holds objects: create one to upload files.", null));
        return;
      }
      const totalBytes = buckets.reduce((sum, b) => sum + b.usage.size_bytes, 0);
      const totalObjects = buckets.reduce((sum, b) => sum + b.usage.object_count, 0);
      replace(body,
        h("p", { class: "summary", text: `${buckets.length} buckets · ${totalObjects.toLocaleString()} objects · ${formatBytes(totalBytes)}` }),
        h("div", { class: "table-wrap" }, h("table", { class: "table" },
          h("caption", { class: "visually-hidden", text: "Buckets" }),
          h("thead", {}, h("tr", {},
            ["Name", "Objects", "Size", "Versioning", "Created", ""].map((t) => h("th", { scope: "col", text: t })))),
          h("tbody", {}, buckets.map((bucket) => h("tr", {},
            h("th", { scope: "row", "data-label": "Name" },
              h("span", { class: "bucket-link" }, h("span", { class: "icon", "aria-hidden": "true", text: "▤" }),
                h("a", { href: folderHref(bucket.name), text: bucket.name }))),
            h("td", { "data-label": "Objects", text: bucket.usage.object_count.toLocaleString() }),
            usageCell(bucket),
            h("td", { "data-label": "Versioning" }, bucket.versioning_enabled ? badge("On", "ok") : badge("Off")),
            h("td", { "data-label": "Created", text: formatDate(bucket.created_at) }),
            h("td", { class: "row-actions" },
              h("a", { class: "btn btn-small", href: `#/buckets/${encodeURIComponent(bucket.name)}/settings`,
                "aria-label": `Settings of ${bucket.name}`, text: "Settings" }),
              h("button", { type: "button", class: "btn btn-small btn-danger-ghost",
                "aria-label": `Delete bucket ${bucket.name}`, text: "Delete",
                onclick: async () => {
                  try {
                    if (await deleteBucket(bucket)) load();
                  } catch (err) {
                    toast(err.message, "error");
                  }
                } }))))))));
    } catch (err) {
      replace(body, h("p", { class: "form-error", role: "alert", text: `Could not list buckets: ${err.message}` }));
    }
  };
  load();
  return page;
}
