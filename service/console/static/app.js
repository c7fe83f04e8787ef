// The console's entry point: the layout, the hash router and the sign-in page.
//
// Routes live in the URL's fragment (#/buckets/photos?prefix=2024/), so the server serves one
// page and a reload or a shared console link lands on the same view.

import { session } from "./api.js";
import { h, replace, field, button, toast, navigate } from "./ui.js";
import { bucketsView } from "./views/buckets.js";
import { bucketSettingsView } from "./views/settings.js";
import { browserView } from "./views/browser.js";
import { objectView } from "./views/object.js";
import { dashboardView } from "./views/dashboard.js";
import { usersView } from "./views/users.js";
import { keysView } from "./views/keys.js";
import { watchView } from "./views/watch.js";
import { auditView } from "./views/audit.js";
import { uploadsPanel } from "./uploads.js";

const root = document.getElementById("app");
let pendingMessage = "";

const routes = [
  [/^\/buckets$/, () => bucketsView()],
  [/^\/buckets\/([^/]+)$/, (m, q) => browserView(decodeURIComponent(m[1]), q)],
  [/^\/buckets\/([^/]+)\/settings$/, (m) => bucketSettingsView(decodeURIComponent(m[1]))],
  [/^\/buckets\/([^/]+)\/object$/, (m, q) => objectView(decodeURIComponent(m[1]), q.get("key") || "")],
  [/^\/dashboard$/, () => dashboardView(), { admin: true }],
  [/^\/users$/, () => usersView(), { admin: true }],
  [/^\/audit$/, () => auditView(), { admin: true }],
  [/^\/keys$/, () => keysView()],
];

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/buckets";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

function render() {
  const { path, query } = parseHash();
  if (path === "/watch") {
    replace(root, watchView(query.get("src") || ""));
    return;
  }
  if (!session.user) {
    replace(root, loginView());
    return;
  }
  if (path === "/login" || path === "/") {
    navigate("/buckets");
    return;
  }
  for (const [pattern, view, options = {}] of routes) {
    const match = path.match(pattern);
    if (!match) continue;
    if (options.admin && !session.isAdmin) break;
    renderShell(path, view(match, query));
    return;
  }
  renderShell(path, h("section", { class: "page" },
    h("h1", { text: "Page not found" }),
    h("p", {}, "There is nothing at this address. ", h("a", { href: "#/buckets", text: "Go to buckets" }))));
}

function navLink(href, label, icon, currentPath) {
  const active = currentPath === href.slice(1) || currentPath.startsWith(href.slice(1) + "/");
  return h("a", { href, class: active ? "nav-link active" : "nav-link", "aria-current": active ? "page" : null },
    h("span", { class: "icon", "aria-hidden": "true", text: icon }), label);
}

function renderShell(path, content) {
  const user = session.user;
  const nav = h("nav", { class: "sidebar", id: "sidebar", "aria-label": "Main" },
    navLink("#/buckets", "Buckets", "▤", path),
    navLink("#/keys", "Access keys", "◈", path),
    session.isAdmin ? navLink("#/users", "Users", "☺", path) : null,
    session.isAdmin ? navLink("#/dashboard", "Dashboard", "◔", path) : null,
    session.isAdmin ? navLink("#/audit", "Audit log", "☷", path) : null);
  const menu = h("button", { type: "button", class: "btn btn-icon menu-toggle", "aria-label": "Menu",
    "aria-controls": "sidebar", "aria-expanded": "false" }, "☰");
  menu.addEventListener("click", () => {
    const open = nav.classList.toggle("open");
    menu.setAttribute("aria-expanded", String(open));
  });
  nav.addEventListener("click", (event) => {
    if (event.target.closest("a")) nav.classList.remove("open");
  });
  const main = h("main", { id: "main", tabindex: "-1" }, content);
  replace(root,
    h("a", { href: "#main", class: "skip-link", text: "Skip to content",
      onclick: (event) => { event.preventDefault(); main.focus(); } }),
    h("header", { class: "topbar" },
      menu,
      h("a", { class: "brand", href: "#/buckets" }, h("span", { class: "logo", "aria-hidden": "true" }), "Object Store"),
      h("div", { class: "spacer" }),
      h("span", { class: "whoami" }, h("span", { class: "avatar", "aria-hidden": "true", text: user.username.slice(0, 1).toUpperCase() }),
        h("span", { class: "whoami-name", text: user.username }), h("span", { class: "badge badge-neutral", text: user.role })),
      button("Sign out", () => session.end("You have signed out."), { kind: "ghost" })),
    h("div", { class: "layout" }, nav, main),
    uploadsPanel());
}

function loginView() {
  const username = h("input", { type: "text", name: "username", autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const message = h("p", { class: pendingMessage ? "form-note" : "form-error", role: "alert", text: pendingMessage });
  pendingMessage = "";
  const submit = button("Sign in", null, { kind: "primary", type: "submit" });
  const form = h("form", { class: "login-card", "aria-labelledby": "login-title" },
    h("div", { class: "login-brand" }, h("span", { class: "logo big", "aria-hidden": "true" })),
    h("h1", { id: "login-title", text: "Sign in to the console" }),
    h("p", { class: "muted", text: "Use your username and password." }),
    field("Username", username),
    field("Password", password),
    message,
    submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.className = "form-error";
    message.textContent = "";
    if (!username.value || !password.value) {
      message.textContent = "Enter your username and password.";
      return;
    }
    submit.disabled = true;
    try {
      await session.signIn(username.value, password.value);
      if (parseHash().path === "/login") navigate("/buckets");
      else render();
    } catch (err) {
      message.textContent = err.status === 401
        ? "Sign-in failed: the username or password is wrong."
        : err.status === 403
          ? "This account is disabled. Ask an administrator."
          : `Sign-in failed: ${err.message}`;
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  setTimeout(() => username.focus(), 0);
  return h("div", { class: "login-page" }, form);
}

session.onEnd((message) => {
  pendingMessage = message || "";
  if (message && message.includes("ended")) toast(message, "error");
  render();
});

window.addEventListener("hashchange", render);
render();
