// Users (admins): create, change role, disable or enable, reset a password, delete.

import { api, session } from "../api.js";
import {
  h, replace, field, button, formDialog, confirmDialog, toast, spinner, badge, formatDate,
} from "../ui.js";

function roleSelect(value = "user") {
  return h("select", {}, ["user", "admin"].map((role) => h("option", { value: role, text: role, selected: role === value })));
}

async function createUser() {
  const username = h("input", { type: "text", autocomplete: "off", spellcheck: "false" });
  const password = h("input", { type: "password", autocomplete: "new-password" });
  const role = roleSelect();
  return formDialog("Create user", () => [
    field("Username", username), field("Password", password, "At least 8 characters."), field("Role", role),
  ], () => api("POST", "/users", { json: { username: username.value.trim(), password: password.value, role: role.value } }),
  "Create user");
}

async function resetPassword(user) {
  const password = h("input", { type: "password", autocomplete: "new-password" });
  return formDialog(`New password for ${user.username}`, () => [field("New password", password, "At least 8 characters. The user's sessions end.")],
    () => api("PATCH", `/users/${encodeURIComponent(user.user_id)}`, { json: { password: password.value } }), "Set password");
}

export function usersView() {
  const body = h("div", {}, spinner("Loading users"));
  const page = h("section", { class: "page" },
    h("div", { class: "page-head" },
      h("div", {}, h("h1", { text: "Users" }), h("p", { class: "muted", text: "People and programs that sign in. Admins can do everything; users only reach their own buckets." })),
      button("Create user", async () => {
        const user = await createUser();
        if (user) {
          toast(`User ${user.username} created`);
          load();
        }
      }, { kind: "primary", icon: "+" })),
    body);
  const act = async (work, message) => {
    try {
      await work();
      if (message) toast(message);
    } catch (err) {
      toast(err.message, "error");
    }
    load();
  };
  const load = async () => {
    try {
      const { users } = await api("GET", "/users");
      replace(body, h("div", { class: "table-wrap" }, h("table", { class: "table" },
        h("caption", { class: "visually-hidden", text: "Users" }),
        h("thead", {}, h("tr", {}, ["Username", "Role", "Status", "Created", ""].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, users.map((user) => {
          const path = `/users/${encodeURIComponent(user.user_id)}`;
          const role = roleSelect(user.role);
          role.setAttribute("aria-label", `Role of ${user.username}`);
          role.addEventListener("change", () => act(() => api("PATCH", path, { json: { role: role.value } }), `${user.username} is now ${role.value}`));
          const active = user.status === "active";
          const self = user.user_id === session.user.user_id;
          return h("tr", {},
            h("th", { scope: "row", "data-label": "Username" }, user.username, self ? [" ", badge("you")] : null),
            h("td", { "data-label": "Role" }, role),
            h("td", { "data-label": "Status" }, active ? badge("active", "ok") : badge("disabled", "warn")),
            h("td", { "data-label": "Created", text: formatDate(user.created_at) }),
            h("td", { class: "row-actions" },
              h("button", { type: "button", class: "btn btn-small", "aria-label": `${active ? "Disable" : "Enable"} ${user.username}`,
                text: active ? "Disable" : "Enable",
                onclick: () => act(() => api("PATCH", path, { json: { status: active ? "disabled" : "active" } }),
                  `${user.username} ${active ? "disabled" : "enabled"}`) }),
              h("button", { type: "button", class: "btn btn-small", "aria-label": `Reset password of ${user.username}`, text: "Password",
                onclick: async () => { if (await resetPassword(user)) toast(`Password of ${user.username} changed`); } }),
              h("button", { type: "button", class: "btn btn-small btn-danger-ghost", "aria-label": `Delete user ${user.username}`, text: "Delete",
                onclick: async () => {
                  if (await confirmDialog("Delete user", `Delete ${user.username} and its access keys?`, "Delete user")) {
                    act(() => api("DELETE", path), `${user.username} deleted`);
                  }
                } })));
        })))));
    } catch (err) {
      replace(body, h("p", { class: "form-error", role: "alert", text: `Could not list users: ${err.message}` }));
    }
  };
  load();
  return page;
}
