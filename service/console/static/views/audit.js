// The audit log (admins): who did what, refusals included, newest page last; filters by
// bucket and user, pages by the log's cursor, and the chain's verification.

import { api } from "../api.js";
import { h, replace, field, button, toast, spinner, badge, formatDate } from "../ui.js";

function principalText(principal) {
  const credential = Object.entries(principal).find(([name]) => name !== "user_id");
  const who = principal.user_id || "anonymous";
  return credential && credential[1] ? `${who} (${credential[0].replace("_id", "")} ${credential[1]})` : who;
}

function statusBadge(status) {
  if (status >= 400) return badge(String(status), "warn");
  return badge(String(status), "ok");
}

export function auditView() {
  const bucket = h("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "any bucket" });
  const user = h("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "any user" });
  const rows = h("tbody", {});
  const status = h("p", { class: "muted", role: "status" });
  const verdict = h("p", { role: "status" });
  const more = button("Load more", () => load(false));
  more.hidden = true;
  let cursor = "0";
  const row = (record) => h("tr", {},
    h("td", { "data-label": "Sequence", class: "mono", text: String(record.sequence) }),
    h("td", { "data-label": "Time", text: formatDate(record.time) }),
    h("td", { "data-label": "Who", text: principalText(record.principal) }),
    h("td", { "data-label": "Action", class: "mono", text: record.action }),
    h("td", { "data-label": "Status" }, statusBadge(record.status)),
    h("td", { "data-label": "Target", class: "mono",
      text: [record.bucket, record.key].filter(Boolean).join("/") || record.path }),
    h("td", { "data-label": "Source", text: record.source }));
  const load = async (fresh) => {
    if (fresh) {
      cursor = "0";
      replace(rows);
    }
    status.textContent = "Loading…";
    try {
      const page = await api("GET", "/system/audit", { query: {
        since: cursor, limit: 100, bucket: bucket.value.trim() || undefined, user_id: user.value.trim() || undefined,
      } });
      rows.append(...page.records.map(row));
      cursor = page.next_cursor || cursor;
      more.hidden = !page.next_cursor;
      status.textContent = rows.children.length ? `${rows.children.length} records shown.` : "No records match.";
    } catch (err) {
      status.textContent = `Could not read the audit log: ${err.message}`;
    }
  };
  const form = h("form", { class: "inline filters", "aria-label": "Audit filters" },
    field("Bucket", bucket), field("User id", user),
    button("Apply filters", null, { kind: "primary", type: "submit" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load(true);
  });
  const verify = async () => {
    replace(verdict, spinner("Verifying"));
    try {
      const outcome = await api("GET", "/system/audit/verify");
      replace(verdict, outcome.ok
        ? h("span", {}, badge("intact", "ok"), ` The chain holds: ${outcome.records} records, ${outcome.first_sequence ?? "-"} to ${outcome.last_sequence ?? "-"}.`)
        : h("span", {}, badge("broken", "warn"), ` Record ${outcome.first_bad_sequence} fails verification.`));
    } catch (err) {
      replace(verdict);
      toast(err.message, "error");
    }
  };
  load(true);
  return h("section", { class: "page" },
    h("div", { class: "page-head" },
      h("div", {}, h("h1", { text: "Audit log" }),
        h("p", { class: "muted", text: "Every request that reached authorisation: writes, admin actions and refusals (reads too when the server records them). Each record is chained to the one before." })),
      button("Verify chain", verify)),
    verdict, form,
    h("div", { class: "table-wrap" }, h("table", { class: "table compact" },
      h("caption", { class: "visually-hidden", text: "Audit records" }),
      h("thead", {}, h("tr", {}, ["Sequence", "Time", "Who", "Action", "Status", "Target", "Source"].map((t) => h("th", { scope: "col", text: t })))),
      rows)),
    status, more);
}
