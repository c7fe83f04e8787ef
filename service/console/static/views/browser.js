// The object browser: one folder of a bucket at a time ("/" as the delimiter, prefixes shown as
// folders), in cursor pages of the listing API, so a bucket of any size pages through.
// Uploads start here (picker, folder picker, drag and drop) into the folder on screen.

import { api, bucketPath, objectPath, imagePath, fetchBlob, download } from "../api.js";
import {
  h, replace, button, toast, spinner, emptyState, confirmDialog, formDialog, field,
  formatBytes, formatDate, folderHref, objectHref, navigate,
} from "../ui.js";
import { enqueue, onUploaded, filesFromDrop } from "../uploads.js";
import { presignDialog } from "./links.js";

const PAGE_SIZES = [50, 100, 200, 500, 1000];
const THUMBNAILS_PER_PAGE = 100;
const THUMBNAILS_AT_ONCE = 4;
let pageSize = 100;

function breadcrumbs(bucket, prefix) {
  const parts = prefix.split("/").filter(Boolean);
  const crumbs = [h("a", { href: "#/buckets", text: "Buckets" }), h("span", { "aria-hidden": "true", text: "/" })];
  if (!parts.length) crumbs.push(h("span", { "aria-current": "page", text: bucket }));
  else crumbs.push(h("a", { href: folderHref(bucket), text: bucket }));
  parts.forEach((part, i) => {
    crumbs.push(h("span", { "aria-hidden": "true", text: "/" }));
    const target = parts.slice(0, i + 1).join("/") + "/";
    crumbs.push(i === parts.length - 1 ? h("span", { "aria-current": "page", text: part })
      : h("a", { href: folderHref(bucket, target), text: part }));
  });
  return h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, crumbs);
}

/** Small previews of the image rows (the image endpoint caches each variant), a few at a
 * time; a row keeps its icon if its image cannot be decoded. */
async function loadThumbnails(targets) {
  const queue = targets.slice(0, THUMBNAILS_PER_PAGE);
  const worker = async () => {
    while (queue.length) {
      const { bucket, key, icon } = queue.shift();
      if (!document.body.contains(icon)) return;
      try {
        const blob = await fetchBlob(imagePath(bucket, key), { width: 64, height: 64, fit: "cover" });
        const img = h("img", { class: "row-thumb", alt: "", src: URL.createObjectURL(blob) });
        img.addEventListener("load", () => URL.revokeObjectURL(img.src), { once: true });
        icon.replaceWith(img);
      } catch {
        // Not an image the server can decode: the icon stays.
      }
    }
  };
  await Promise.all(Array.from({ length: THUMBNAILS_AT_ONCE }, worker));
}

function fileIcon(contentType) {
  if (contentType.startsWith("image/")) return "▣";
  if (contentType.startsWith("video/")) return "▶";
  if (contentType.startsWith("text/")) return "≡";
  return "▢";
}

export function browserView(bucket, query) {
  const prefix = query.get("prefix") || "";
  const listing = h("div", { class: "listing" }, spinner("Loading objects"));
  const pager = h("div", { class: "pager" });
  const cursors = [null];
  let page = 0;
  let loading = false;

  const load = async () => {
    if (loading) return;
    loading = true;
    try {
      const body = await api("GET", bucketPath(bucket, "/objects"), {
        query: { prefix, delimiter: "/", limit: pageSize, cursor: cursors[page] },
      });
      cursors[page + 1] = body.next_cursor;
      renderListing(body);
    } catch (err) {
      replace(listing, h("p", { class: "form-error", role: "alert", text: `Could not list objects: ${err.message}` }));
    } finally {
      loading = false;
    }
  };

  const deleteObject = async (key) => {
    if (!await confirmDialog("Delete object", `Delete ${key}?`)) return;
    try {
      await api("DELETE", objectPath(bucket, key));
      toast(`Deleted ${key}`);
      load();
    } catch (err) {
      toast(err.message, "error");
    }
  };

  const renderListing = (body) => {
    const rows = [];
    for (const folder of body.common_prefixes) {
      const name = folder.slice(prefix.length);
      rows.push(h("tr", { class: "folder-row" },
        h("th", { scope: "row", "data-label": "Name" },
          h("span", { class: "entry" }, h("span", { class: "icon folder", "aria-hidden": "true", text: "▰" }),
            h("a", { href: folderHref(bucket, folder), text: name }))),
        h("td", { "data-label": "Size", text: "Folder" }), h("td", { "data-label": "Type", text: "—" }),
        h("td", { "data-label": "Modified", text: "—" }), h("td", {})));
    }
    const thumbnails = [];
    for (const object of body.objects) {
      const name = object.key.slice(prefix.length);
      const icon = h("span", { class: "icon", "aria-hidden": "true", text: fileIcon(object.content_type) });
      if (object.content_type.startsWith("image/")) thumbnails.push({ bucket, key: object.key, icon });
      rows.push(h("tr", {},
        // The icon sits beside the link, not in it: the link's text, and name, is the key's.
        h("th", { scope: "row", "data-label": "Name" },
          h("span", { class: "entry" }, icon, h("a", { href: objectHref(bucket, object.key), text: name }))),
        h("td", { "data-label": "Size", text: formatBytes(object.size_bytes) }),
        h("td", { "data-label": "Type", class: "muted", text: object.content_type }),
        h("td", { "data-label": "Modified", text: formatDate(object.updated_at) }),
        h("td", { class: "row-actions" },
          h("button", { type: "button", class: "btn btn-small", "aria-label": `Download ${name}`, text: "Download",
            onclick: () => download(bucket, object.key).catch((err) => toast(err.message, "error")) }),
          h("button", { type: "button", class: "btn btn-small", "aria-label": `Link to ${name}`, text: "Link",
            onclick: () => presignDialog(bucket, object.key) }),
          h("button", { type: "button", class: "btn btn-small btn-danger-ghost", "aria-label": `Delete ${name}`, text: "Delete",
            onclick: () => deleteObject(object.key) }))));
    }
    const count = body.objects.length + body.common_prefixes.length;
    const first = page * pageSize + 1;
    if (!count && page === 0) {
      replace(listing, emptyState(prefix ? "This folder is empty" : "This bucket is empty",
        "Drop files or folders here, or use the upload buttons."));
    } else {
      replace(listing, h("div", { class: "table-wrap" }, h("table", { class: "table objects" },
        h("caption", { class: "visually-hidden", text: `Contents of ${bucket}/${prefix}` }),
        h("thead", {}, h("tr", {}, ["Name", "Size", "Type", "Modified", ""].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, rows))));
    }
    loadThumbnails(thumbnails);
    const sizeSelect = h("select", { id: "page-size", onchange: () => {
      pageSize = Number(sizeSelect.value);
      cursors.length = 1;
      page = 0;
      load();
    } }, PAGE_SIZES.map((size) => h("option", { value: String(size), text: String(size), selected: size === pageSize })));
    replace(pager,
      h("span", { class: "muted", role: "status", text: count ? `Page ${page + 1} · items ${first.toLocaleString()}–${(first + count - 1).toLocaleString()}` : "" }),
      h("span", { class: "spacer" }),
      h("label", { for: "page-size", class: "muted", text: "Per page" }), sizeSelect,
      h("button", { type: "button", class: "btn btn-small", text: "Previous page", disabled: page === 0,
        onclick: () => { page -= 1; load(); } }),
      h("button", { type: "button", class: "btn btn-small", text: "Next page", disabled: !body.next_cursor,
        onclick: () => { page += 1; load(); } }));
  };

  const startUpload = (entries) => {
    if (!entries.length) return;
    const files = `${entries.length} file${entries.length === 1 ? "" : "s"}`;
    const ended = enqueue(bucket, prefix, entries);
    // The note lasts as long as the uploads, then says how they ended.
    toast(`Uploading ${files} to ${bucket}/${prefix}`, "info", { until: ended });
    ended.then((states) => {
      const failed = states.filter((state) => state === "failed").length;
      const done = states.filter((state) => state === "done").length;
      if (failed) toast(`${failed} of ${files} failed to upload: see Uploads`, "error");
      else if (done) toast(`Uploaded ${done === entries.length ? files : `${done} of ${files}`} to ${bucket}/${prefix}`);
    });
  };
  const filesInput = h("input", { type: "file", multiple: true, id: "upload-files", class: "visually-hidden",
    onchange: () => { startUpload([...filesInput.files].map((file) => ({ file, path: file.name }))); filesInput.value = ""; } });
  const folderInput = h("input", { type: "file", webkitdirectory: true, id: "upload-folder", class: "visually-hidden",
    onchange: () => {
      startUpload([...folderInput.files].map((file) => ({ file, path: file.webkitRelativePath || file.name })));
      folderInput.value = "";
    } });

  const newFolder = async () => {
    const name = h("input", { type: "text", autocomplete: "off" });
    const folder = await formDialog("New folder", () => [field("Folder name", name,
      "Folders are key prefixes: the folder exists once it holds an object.")], async () => {
      const value = name.value.trim().replace(/^\/+|\/+$/g, "");
      if (!value) throw new Error("Enter a folder name.");
      return value;
    }, "Open folder");
    if (folder) navigate(`/buckets/${encodeURIComponent(bucket)}?prefix=${encodeURIComponent(prefix + folder + "/")}`);
  };

  const filter = h("input", { type: "search", id: "prefix-filter", placeholder: "Filter by name prefix", value: "" });
  filter.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      const value = filter.value;
      if (value.endsWith("/")) navigate(`/buckets/${encodeURIComponent(bucket)}?prefix=${encodeURIComponent(prefix + value)}`);
      else {
        // A partial name: list the keys that start with it, without the folder view.
        api("GET", bucketPath(bucket, "/objects"), { query: { prefix: prefix + value, delimiter: "/", limit: pageSize } })
          .then(renderListing).catch((err) => toast(err.message, "error"));
      }
    }
  });

  const drop = h("div", { class: "dropzone", "aria-label": `Drop files here to upload to ${bucket}/${prefix}` },
    listing, h("div", { class: "drop-hint", "aria-hidden": "true", text: `Drop to upload to ${bucket}/${prefix}` }));
  drop.addEventListener("dragover", (event) => { event.preventDefault(); drop.classList.add("dragging"); });
  drop.addEventListener("dragleave", (event) => { if (!drop.contains(event.relatedTarget)) drop.classList.remove("dragging"); });
  drop.addEventListener("drop", async (event) => {
    event.preventDefault();
    drop.classList.remove("dragging");
    startUpload(await filesFromDrop(event.dataTransfer));
  });

  const page$ = h("section", { class: "page" },
    breadcrumbs(bucket, prefix),
    h("div", { class: "page-head" },
      h("h1", { text: prefix ? prefix.split("/").filter(Boolean).pop() : bucket }),
      h("div", { class: "toolbar" },
        // The inputs come first and are focusable (visually hidden): Tab reaches them, the
        // label after each shows its focus ring, and Space opens the picker.
        filesInput, h("label", { for: "upload-files", class: "btn btn-primary" },
          h("span", { class: "icon", "aria-hidden": "true", text: "↑" }), "Upload files"),
        folderInput, h("label", { for: "upload-folder", class: "btn btn-secondary" },
          h("span", { class: "icon", "aria-hidden": "true", text: "▰" }), "Upload folder"),
        button("New folder", newFolder),
        button("Refresh", () => load(), { kind: "ghost" }),
        h("a", { class: "btn btn-ghost", href: `#/buckets/${encodeURIComponent(bucket)}/settings`, text: "Bucket settings" }))),
    h("div", { class: "filter-bar" }, h("label", { for: "prefix-filter", class: "visually-hidden", text: "Filter by name prefix" }), filter),
    drop, pager);

  const unsubscribe = onUploaded((item) => {
    if (!document.body.contains(page$)) {
      unsubscribe();
      return;
    }
    if (item.bucket === bucket && item.key.startsWith(prefix)) {
      clearTimeout(page$.refreshTimer);
      page$.refreshTimer = setTimeout(load, 300);
    }
  });
  load();
  return page$;
}
