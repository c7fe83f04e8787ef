// An object's retention and legal hold, on its page (object lock: buckets created with
// "object_lock_enabled"). Shows the current version's lock and sets, lengthens or removes
// the retention (an admin may tick the governance bypass) and turns the legal hold on or off.

import { api, objectPath, session } from "../api.js";
import { h, replace, field, button, toast, badge, formatDate } from "../ui.js";

/** A retention's end as the value of a datetime-local input (the browser's local time). */
function localValue(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

export function lockSection(bucket, key, object, bucketInfo, onChange) {
  const body = h("div", {});
  const section = h("section", { class: "card", "aria-labelledby": "lock-title" },
    h("h2", { id: "lock-title", text: "Retention and legal hold" }), body);
  if (!bucketInfo.object_lock_enabled) {
    replace(body, h("p", { class: "muted", text: "This bucket was created without object lock: its versions cannot be retained or held." }));
    return section;
  }
  const path = objectPath(bucket, key);
  const query = { version_id: object.version_id };
  const retention = object.retention;
  const now = retention
    ? h("p", {}, badge(retention.mode, retention.mode === "compliance" ? "warn" : "neutral"),
      ` until ${formatDate(retention.retain_until)}`)
    : h("p", { class: "muted", text: "No retention: the current version may be deleted." });
  const hold = h("p", {}, "Legal hold: ", object.legal_hold ? badge("on", "warn") : badge("off"));
  const mode = h("select", {}, ["governance", "compliance"].map((m) => h("option", { value: m, text: m, selected: retention?.mode === m })));
  const start = retention ? new Date(retention.retain_until) : new Date(Date.now() + 86_400_000);
  const until = h("input", { type: "datetime-local", value: localValue(start) });
  const bypass = h("input", { type: "checkbox", id: "lock-bypass" });
  const act = async (work, message) => {
    try {
      await work();
      toast(message);
      onChange();
    } catch (err) {
      toast(err.message, "error");
    }
  };
  const bypassHeaders = () => (bypass.checked ? { "X-Bypass-Governance-Retention": "true" } : {});
  replace(body,
    now, hold,
    h("div", { class: "inline" },
      field("Retention mode", mode),
      field("Retain until", until, "Your local time. A compliance retention can be neither shortened nor removed.")),
    session.isAdmin ? h("div", { class: "field checkbox" }, bypass,
      h("label", { for: bypass.id, text: "Bypass governance retention (admins)" })) : null,
    h("div", { class: "toolbar" },
      button("Set retention", () => act(() => {
        const end = new Date(until.value);
        if (Number.isNaN(end.getTime())) throw new Error("Choose when the retention ends.");
        return api("PUT", `${path}/retention`, { query, headers: bypassHeaders(),
          json: { mode: mode.value, retain_until: end.toISOString() } });
      }, "Retention set"), { kind: "primary" }),
      retention ? button("Remove retention", () => act(() => api("PUT", `${path}/retention`,
        { query, headers: bypassHeaders(), json: { mode: null, retain_until: null } }), "Retention removed")) : null,
      button(object.legal_hold ? "Turn legal hold off" : "Turn legal hold on", () => act(
        () => api("PUT", `${path}/legal-hold`, { query, json: { status: object.legal_hold ? "off" : "on" } }),
        object.legal_hold ? "Legal hold off" : "Legal hold on"))));
  return section;
}
