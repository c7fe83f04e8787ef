// One object: its metadata, download, links, deletion, versions, and a preview (images through
// the image endpoint, videos through the video panel).

import {
  api, bucketPath, objectPath, imagePath, fetchBlob, download, downloadVersion,
} from "../api.js";
import {
  h, replace, button, toast, spinner, confirmDialog, badge, formatBytes, formatDate,
  folderHref, navigate,
} from "../ui.js";
import { presignDialog } from "./links.js";
import { videoPanel, isVideo } from "./video.js";
import { lockSection } from "./lock.js";

function crumbs(bucket, key) {
  const parts = key.split("/");
  const out = [h("a", { href: "#/buckets", text: "Buckets" }), h("span", { "aria-hidden": "true", text: "/" }),
    h("a", { href: folderHref(bucket), text: bucket })];
  parts.slice(0, -1).forEach((part, i) => {
    out.push(h("span", { "aria-hidden": "true", text: "/" }),
      h("a", { href: folderHref(bucket, parts.slice(0, i + 1).join("/") + "/"), text: part }));
  });
  out.push(h("span", { "aria-hidden": "true", text: "/" }), h("span", { "aria-current": "page", text: parts.at(-1) }));
  return h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, out);
}

function metadataList(object) {
  const rows = [
    ["Size", `${formatBytes(object.size_bytes)} (${object.size_bytes.toLocaleString()} bytes)`],
    ["Content type", object.content_type],
    ["Modified", formatDate(object.updated_at)],
    ["Version", object.version_id || "— (versioning off)"],
    ["SHA-256", object.sha256_checksum],
  ];
  for (const [name, value] of Object.entries(object.custom_metadata || {})) rows.push([`x-meta-${name}`, value]);
  return h("dl", { class: "meta" }, rows.map(([name, value]) => [h("dt", { text: name }), h("dd", { class: name === "SHA-256" ? "mono" : null, text: value })]));
}

function imagePreview(bucket, key) {
  const holder = h("figure", { class: "preview" }, spinner("Loading preview"));
  fetchBlob(imagePath(bucket, key), { width: 1200, height: 900, fit: "inside" })
    .then((blob) => {
      const url = URL.createObjectURL(blob);
      const img = h("img", { src: url, alt: `Preview of ${key}`, class: "preview-image" });
      img.addEventListener("load", () => {
        caption.textContent = `Preview ${img.naturalWidth}×${img.naturalHeight}, ${formatBytes(blob.size)} (resized by the image endpoint)`;
      });
      const caption = h("figcaption", { class: "muted" });
      replace(holder, img, caption);
    })
    .catch((err) => replace(holder, h("p", { class: "notice", role: "status", text: `No preview: ${err.message}` })));
  return holder;
}

function versionsSection(bucket, key, onChange) {
  const body = h("div", {}, spinner("Loading versions"));
  const load = async () => {
    try {
      const versions = [];
      let cursor = null;
      do {
        const page = await api("GET", bucketPath(bucket, "/versions"), { query: { prefix: key, limit: 1000, cursor } });
        versions.push(...page.versions.filter((v) => v.key === key));
        cursor = page.next_cursor;
      } while (cursor && versions.length < 5000);
      if (!versions.length || (versions.length === 1 && !versions[0].version_id)) {
        replace(body, h("p", { class: "muted", text: "Versioning is off for this bucket: there is one version." }));
        return;
      }
      replace(body, h("div", { class: "table-wrap" }, h("table", { class: "table compact" },
        h("thead", {}, h("tr", {}, ["Version", "Size", "Modified", "", ""].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, versions.map((version) => h("tr", {},
          h("td", { "data-label": "Version", class: "mono" }, version.version_id,
            version.is_latest ? [" ", badge("latest", "ok")] : null,
            version.is_delete_marker ? [" ", badge("delete marker", "warn")] : null,
            version.retention ? [" ", badge(`${version.retention.mode} until ${formatDate(version.retention.retain_until)}`, "warn")] : null,
            version.legal_hold ? [" ", badge("legal hold", "warn")] : null),
          h("td", { "data-label": "Size", text: version.is_delete_marker ? "—" : formatBytes(version.size_bytes) }),
          h("td", { "data-label": "Modified", text: formatDate(version.updated_at || version.created_at) }),
          h("td", {}, version.is_delete_marker ? null : h("button", { type: "button", class: "btn btn-small",
            "aria-label": `Download version ${version.version_id}`, text: "Download",
            onclick: () => downloadVersion(bucket, key, version.version_id).catch((err) => toast(err.message, "error")) })),
          h("td", {}, h("button", { type: "button", class: "btn btn-small btn-danger-ghost",
            "aria-label": `Delete version ${version.version_id}`, text: "Delete",
            onclick: async () => {
              if (!await confirmDialog("Delete version", `Delete version ${version.version_id} of ${key} for good?`)) return;
              try {
                await api("DELETE", objectPath(bucket, key), { query: { version_id: version.version_id } });
                toast("Version deleted");
                load();
                onChange();
              } catch (err) {
                toast(err.message, "error");
              }
            } }))))))));
    } catch (err) {
      replace(body, h("p", { class: "form-error", text: err.message }));
    }
  };
  load();
  return h("section", { class: "card", "aria-labelledby": "versions-title" }, h("h2", { id: "versions-title", text: "Versions" }), body);
}

export function objectView(bucket, key) {
  const name = key.split("/").pop();
  const parent = key.includes("/") ? key.slice(0, key.lastIndexOf("/") + 1) : "";
  const details = h("div", {}, spinner("Loading object"));
  const page = h("section", { class: "page" }, crumbs(bucket, key), details);
  const load = async () => {
    let object;
    let bucketInfo;
    try {
      const listed = await api("GET", bucketPath(bucket, "/objects"), { query: { prefix: key, limit: 1 } });
      object = listed.objects.find((o) => o.key === key);
      if (!object) throw new Error("this object does not exist (it may have been deleted)");
      bucketInfo = await api("GET", bucketPath(bucket));
    } catch (err) {
      replace(details, h("h1", { text: name }), h("p", { class: "form-error", role: "alert", text: err.message }),
        h("a", { href: folderHref(bucket, parent), text: "Back to the folder" }));
      return;
    }
    const image = object.content_type.startsWith("image/");
    replace(details,
      h("div", { class: "page-head" },
        h("h1", { class: "object-title", text: name }),
        h("div", { class: "toolbar" },
          button("Download", () => download(bucket, key).catch((err) => toast(err.message, "error")), { kind: "primary", icon: "↓" }),
          button("Presigned link", () => presignDialog(bucket, key), { icon: "⚭" }),
          button("Delete object", async () => {
            if (!await confirmDialog("Delete object", `Delete ${key}?`)) return;
            try {
              await api("DELETE", objectPath(bucket, key));
              toast(`Deleted ${key}`);
              navigate(`/buckets/${encodeURIComponent(bucket)}${parent ? `?prefix=${encodeURIComponent(parent)}` : ""}`);
            } catch (err) {
              toast(err.message, "error");
            }
          }, { kind: "danger" }))),
      h("div", { class: "object-grid" },
        h("div", { class: "stack" },
          image ? h("section", { class: "card", "aria-label": "Image preview" }, imagePreview(bucket, key)) : null,
          isVideo(object) ? videoPanel(bucket, key) : null,
          !image && !isVideo(object) ? h("section", { class: "card" }, h("p", { class: "muted", text: "No preview for this type of file." })) : null,
          versionsSection(bucket, key, load)),
        h("div", { class: "stack" },
          h("section", { class: "card", "aria-labelledby": "details-title" }, h("h2", { id: "details-title", text: "Details" }), metadataList(object)),
          lockSection(bucket, key, object, bucketInfo, load))));
  };
  load();
  return page;
}
