// Access keys: a user sees and manages its own; an admin sees every key and can make one for
// any user. A new key's secret is shown once, in a dialog, and never again.

import { api, session } from "../api.js";
import {
  h, replace, field, button, formDialog, openDialog, confirmDialog, copyable, toast, spinner,
  badge, formatDate,
} from "../ui.js";

async function createKey(users) {
  const name = h("input", { type: "text", autocomplete: "off", placeholder: "e.g. backup job" });
  const owner = users ? h("select", {}, users.map((u) => h("option", { value: u.user_id, text: u.username,
    selected: u.user_id === session.user.user_id }))) : null;
  const key = await formDialog("Create access key", () => [
    field("Key name", name), owner ? field("For user", owner) : null,
  ], () => api("POST", "/access-keys", { json: { name: name.value.trim() || undefined, user_id: owner ? owner.value : undefined } }),
  "Create key");
  if (!key) return null;
  await openDialog("New access key", (close) => h("div", { class: "dialog-body" },
    h("p", { class: "notice", text: "Copy the secret now: it is shown only once." }),
    copyable("Access key id", key.access_key_id),
    copyable("Secret key", key.secret_key),
    h("div", { class: "actions" }, button("Done", () => close(true), { kind: "primary" }))));
  return key;
}

export function keysView() {
  const body = h("div", {}, spinner("Loading access keys"));
  let users = null;
  const page = h("section", { class: "page" },
    h("div", { class: "page-head" },
      h("div", {}, h("h1", { text: "Access keys" }),
        h("p", { class: "muted", text: "Keys for programs (HTTP Basic: key id and secret). A key acts as its user." })),
      button("Create access key", async () => {
        if (await createKey(users)) load();
      }, { kind: "primary", icon: "+" })),
    body);
  const load = async () => {
    try {
      const [{ access_keys: keys }, userList] = await Promise.all([
        api("GET", "/access-keys"), session.isAdmin ? api("GET", "/users") : Promise.resolve(null)]);
      users = userList ? userList.users : null;
      const names = new Map((users || [session.user]).map((u) => [u.user_id, u.username]));
      if (!keys.length) {
        replace(body, h("p", { class: "muted", text: "No access keys yet." }));
        return;
      }
      replace(body, h("div", { class: "table-wrap" }, h("table", { class: "table" },
        h("caption", { class: "visually-hidden", text: "Access keys" }),
        h("thead", {}, h("tr", {}, ["Key id", "Name", "User", "Status", "Last used", ""].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, keys.map((key) => {
          const path = `/access-keys/${encodeURIComponent(key.access_key_id)}`;
          const active = key.status === "active";
          const change = async (work, message) => {
            try {
              await work();
              toast(message);
            } catch (err) {
              toast(err.message, "error");
            }
            load();
          };
          return h("tr", {},
            h("th", { scope: "row", class: "mono", "data-label": "Key id", text: key.access_key_id }),
            h("td", { "data-label": "Name", text: key.name || "—" }),
            h("td", { "data-label": "User", text: names.get(key.user_id) || key.user_id }),
            h("td", { "data-label": "Status" }, active ? badge("active", "ok") : badge("revoked", "warn")),
            h("td", { "data-label": "Last used", text: formatDate(key.last_used_at) }),
            h("td", { class: "row-actions" },
              h("button", { type: "button", class: "btn btn-small", "aria-label": `${active ? "Revoke" : "Reactivate"} key ${key.access_key_id}`,
                text: active ? "Revoke" : "Reactivate",
                onclick: () => change(() => api("PATCH", path, { json: { status: active ? "revoked" : "active" } }),
                  `Key ${key.access_key_id} ${active ? "revoked" : "reactivated"}`) }),
              h("button", { type: "button", class: "btn btn-small btn-danger-ghost", "aria-label": `Delete key ${key.access_key_id}`, text: "Delete",
                onclick: async () => {
                  if (await confirmDialog("Delete access key", `Delete ${key.access_key_id}? Programs using it stop working.`, "Delete key")) {
                    change(() => api("DELETE", path), `Key ${key.access_key_id} deleted`);
                  }
                } })));
        })))));
    } catch (err) {
      replace(body, h("p", { class: "form-error", role: "alert", text: `Could not list keys: ${err.message}` }));
    }
  };
  load();
  return page;
}
