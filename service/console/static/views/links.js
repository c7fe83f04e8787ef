// Links that work without credentials: presigned object URLs and video share links, each
// with an expiry picker. A share link is also offered as a console player link
// (#/watch?src=...), which plays the shared HLS output in any browser with no sign-in.

import { api, presign } from "../api.js";
import { h, replace, field, button, openDialog, expiryPicker, copyable, formatDate } from "../ui.js";

export function playerLink(hlsUrl) {
  const src = new URL(hlsUrl, location.origin);
  return `${location.origin}/console/#/watch?src=${encodeURIComponent(src.pathname)}`;
}

export function presignDialog(bucket, key) {
  return openDialog("Presigned link", () => {
    const expiry = expiryPicker("Link expires after");
    const method = h("select", {},
      h("option", { value: "GET", text: "Download (GET)" }), h("option", { value: "PUT", text: "Upload (PUT)" }),
      h("option", { value: "HEAD", text: "Metadata only (HEAD)" }));
    const result = h("div", { class: "link-result", "aria-live": "polite" });
    const form = h("form", { class: "dialog-body" },
      h("p", { class: "muted" }, "Anyone with the link can use it on ", h("strong", { text: `${bucket}/${key}` }),
        " until it expires, without signing in."),
      field("Allowed method", method), expiry.element,
      h("div", { class: "actions left" }, button("Create link", null, { kind: "primary", type: "submit" })),
      result);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const link = await presign(bucket, key, method.value, Number(expiry.select.value));
        replace(result, copyable("Link", link.url),
          h("p", { class: "muted", text: `Valid until ${formatDate(link.expires_at)}.` }));
      } catch (err) {
        replace(result, h("p", { class: "form-error", role: "alert", text: err.message }));
      }
    });
    return form;
  });
}

export function shareDialog(job) {
  return openDialog("Share video", () => {
    const expiry = expiryPicker("Share expires after", 86400);
    const result = h("div", { class: "link-result", "aria-live": "polite" });
    const form = h("form", { class: "dialog-body" },
      h("p", { class: "muted", text: "A share plays the packaged stream without credentials until it expires or is revoked." }),
      expiry.element,
      h("div", { class: "actions left" }, button("Create share link", null, { kind: "primary", type: "submit" })),
      result);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const share = await api("POST", "/videos/shares", {
          json: { job_id: job.job_id, expires_in: Number(expiry.select.value) },
        });
        replace(result,
          copyable("Player link", playerLink(share.hls_url)),
          copyable("HLS URL", new URL(share.hls_url, location.origin).href),
          h("p", { class: "muted", text: `Valid until ${formatDate(share.expires_at)}.` }),
          button("Revoke share", async () => {
            await api("DELETE", `/videos/shares/${encodeURIComponent(share.share_id)}`);
            replace(result, h("p", { class: "notice", role: "status", text: "The share was revoked." }));
          }, { kind: "danger" }));
      } catch (err) {
        replace(result, h("p", { class: "form-error", role: "alert", text: err.message }));
      }
    });
    return form;
  }, { wide: true });
}
