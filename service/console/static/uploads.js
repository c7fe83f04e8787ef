// Uploads: a queue of files, each with its own progress, cancel and retry, shown in a panel.
//
// Small files go up in one PUT. Files larger than the multipart threshold (16 MiB; tests lower
// it through sessionStorage "console.multipartThresholdBytes") go through a multipart session
// with parts sent in parallel (the session's max_parallel_parts, at most 4 from a browser).
// Retry resumes a multipart upload: parts the server already holds are not sent again.

import { api, upload, objectPath, ApiError } from "./api.js";
import { h, replace, button, formatBytes } from "./ui.js";

const MIB = 1024 * 1024;
const FILES_AT_ONCE = 3;
const PARTS_AT_ONCE = 4;

function setting(name, fallback) {
  const value = Number(sessionStorage.getItem(name));
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

const items = [];
const finishedListeners = new Set();
let nextId = 1;
let panel = null;
let collapsed = false;

/** Calls `listener(item)` whenever an upload completes (views refresh their listing). */
export function onUploaded(listener) {
  finishedListeners.add(listener);
  return () => finishedListeners.delete(listener);
}

/** Queues files: `entries` are { file, path } where path is relative (folders keep theirs).
 *  Resolves with their states ("done", "failed" or "cancelled") once each first ended. */
export function enqueue(bucket, prefix, entries) {
  const ended = [];
  for (const { file, path } of entries) {
    const item = {
      id: nextId++, file, bucket, key: prefix + path, status: "queued", loaded: 0,
      error: "", aborts: new Set(), uploadId: null, row: null, ended: null,
    };
    ended.push(new Promise((resolve) => { item.ended = resolve; }));
    items.push(item);
  }
  collapsed = false;
  pump();
  draw();
  return Promise.all(ended);
}

function settle(item) {
  if (item.ended) item.ended(item.status);
  item.ended = null;
}

function pump() {
  const running = items.filter((item) => item.status === "uploading").length;
  for (const item of items.filter((i) => i.status === "queued").slice(0, FILES_AT_ONCE - running)) {
    start(item);
  }
}

async function start(item) {
  item.status = "uploading";
  item.error = "";
  drawItem(item);
  try {
    if (item.file.size > setting("console.multipartThresholdBytes", 16 * MIB)) await multipart(item);
    else await single(item);
    item.status = "done";
    item.loaded = item.file.size;
    for (const listener of finishedListeners) listener(item);
  } catch (err) {
    if (item.status !== "cancelled") {
      item.status = "failed";
      item.error = err.message;
    }
  }
  drawItem(item);
  drawSummary();
  settle(item);
  pump();
}

async function single(item) {
  const request = upload(objectPath(item.bucket, item.key), item.file, {
    onProgress: (loaded) => progress(item, loaded),
  });
  item.aborts.add(request.abort);
  try {
    await request.promise;
  } finally {
    item.aborts.delete(request.abort);
  }
}

async function multipart(item) {
  let stored = new Map();
  if (item.uploadId) {
    try {
      const session = await api("GET", `/multipart/${item.uploadId}`);
      stored = new Map(session.parts.map((part) => [part.part_number, part]));
      item.partSize = item.partSize || session.recommended_part_size;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      item.uploadId = null;
    }
  }
  if (!item.uploadId) {
    const session = await api("POST", "/multipart/init", {
      json: { bucket: item.bucket, key: item.key, content_type: item.file.type || undefined },
    });
    item.uploadId = session.upload_id;
    item.partSize = setting("console.partSizeBytes", session.recommended_part_size);
    item.parallel = Math.max(1, Math.min(PARTS_AT_ONCE, session.max_parallel_parts));
  }
  const size = item.file.size;
  const count = Math.max(1, Math.ceil(size / item.partSize));
  const done = new Map();
  const loaded = new Map();
  const todo = [];
  for (let number = 1; number <= count; number += 1) {
    const begin = (number - 1) * item.partSize;
    const length = Math.min(item.partSize, size - begin);
    const held = stored.get(number);
    if (held && held.size_bytes === length) {
      done.set(number, held.etag);
      loaded.set(number, length);
    } else todo.push({ number, begin, length });
  }
  const report = () => progress(item, [...loaded.values()].reduce((a, b) => a + b, 0));
  report();
  // A failed part stops the attempt, but the parts still in flight are let finish before the
  // attempt fails: a retry then finds them stored and never races a worker of this attempt.
  let failure = null;
  const worker = async () => {
    while (todo.length && failure === null && item.status === "uploading") {
      const part = todo.shift();
      const request = upload(`/multipart/${item.uploadId}/part?partNumber=${part.number}`,
        item.file.slice(part.begin, part.begin + part.length), {
          onProgress: (bytes) => { loaded.set(part.number, bytes); report(); },
        });
      item.aborts.add(request.abort);
      try {
        const result = await request.promise;
        done.set(part.number, result.etag);
        loaded.set(part.number, part.length);
        report();
      } catch (err) {
        failure = failure || err;
      } finally {
        item.aborts.delete(request.abort);
      }
    }
  };
  await Promise.all(Array.from({ length: item.parallel || PARTS_AT_ONCE }, worker));
  if (failure !== null && item.status === "uploading") throw failure;
  if (item.status !== "uploading") throw new Error("cancelled");
  const parts = [...done.entries()].sort((a, b) => a[0] - b[0])
    .map(([number, etag]) => ({ part_number: number, etag }));
  await api("POST", `/multipart/${item.uploadId}/complete`, { json: { parts } });
  item.uploadId = null;
}

function progress(item, loaded) {
  item.loaded = Math.min(loaded, item.file.size);
  if (item.row) {
    item.row.bar.value = item.file.size ? item.loaded / item.file.size : 1;
    item.row.detail.textContent = `${formatBytes(item.loaded)} of ${formatBytes(item.file.size)}`;
  }
}

function cancel(item) {
  const waiting = item.status === "queued";
  item.status = "cancelled";
  for (const abort of [...item.aborts]) abort();
  if (item.uploadId) {
    api("DELETE", `/multipart/${item.uploadId}`).catch(() => {});
    item.uploadId = null;
  }
  drawItem(item);
  drawSummary();
  if (waiting) settle(item); // a running one settles when its attempt ends
  pump();
}

function retry(item) {
  item.status = "queued";
  drawItem(item);
  pump();
}

function clearFinished() {
  for (let index = items.length - 1; index >= 0; index -= 1) {
    if (["done", "cancelled"].includes(items[index].status)) items.splice(index, 1);
  }
  draw();
}

const STATUS_TEXT = {
  queued: "Waiting", uploading: "Uploading", done: "Uploaded", failed: "Failed", cancelled: "Cancelled",
};

function drawItem(item) {
  if (!item.row) return;
  const { li, bar, state, actions } = item.row;
  li.dataset.status = item.status;
  bar.value = item.status === "done" ? 1 : item.file.size ? item.loaded / item.file.size : 0;
  state.textContent = item.status === "failed" ? `Failed: ${item.error}` : STATUS_TEXT[item.status];
  const name = item.key;
  replace(actions,
    ["queued", "uploading"].includes(item.status)
      ? h("button", { type: "button", class: "btn btn-small", "aria-label": `Cancel upload of ${name}`,
        onclick: () => cancel(item), text: "Cancel" }) : null,
    ["failed", "cancelled"].includes(item.status)
      ? h("button", { type: "button", class: "btn btn-small", "aria-label": `Retry upload of ${name}`,
        onclick: () => retry(item), text: "Retry" }) : null);
}

function drawSummary() {
  if (!panel) return;
  const done = items.filter((item) => item.status === "done").length;
  const failed = items.filter((item) => item.status === "failed").length;
  panel.summary.textContent = `Uploads: ${done} of ${items.length} done` + (failed ? `, ${failed} failed` : "");
  panel.root.hidden = items.length === 0;
  panel.root.classList.toggle("collapsed", collapsed);
  panel.toggle.setAttribute("aria-expanded", String(!collapsed));
  panel.toggle.textContent = collapsed ? "Show" : "Hide";
}

function draw() {
  if (!panel) return;
  replace(panel.list, items.map((item) => {
    const bar = h("progress", { max: "1", value: "0", "aria-label": `Upload progress of ${item.key}` });
    const state = h("span", { class: "upload-state" });
    const detail = h("span", { class: "upload-detail", text: formatBytes(item.file.size) });
    const actions = h("span", { class: "upload-actions" });
    const li = h("li", { class: "upload-item" },
      h("div", { class: "upload-line" }, h("span", { class: "upload-name", title: item.key, text: item.key }), actions),
      bar, h("div", { class: "upload-line small" }, state, detail));
    item.row = { li, bar, state, detail, actions };
    drawItem(item);
    return li;
  }));
  drawSummary();
}

/** The panel (one element, kept across page renders). */
export function uploadsPanel() {
  if (!panel) {
    const summary = h("h2", { class: "uploads-title" });
    const toggle = h("button", { type: "button", class: "btn btn-small", "aria-controls": "upload-list",
      onclick: () => { collapsed = !collapsed; drawSummary(); } });
    const list = h("ul", { class: "upload-list", id: "upload-list" });
    const root = h("section", { class: "uploads", "aria-label": "Uploads", hidden: true },
      h("header", { class: "uploads-head" }, summary, toggle,
        button("Clear finished", clearFinished, { kind: "ghost" })),
      list);
    panel = { root, summary, list, toggle };
    draw();
  }
  return panel.root;
}

/** Every file under a dropped directory entry, with its path relative to the drop. */
export async function filesFromDrop(dataTransfer) {
  const entries = [...dataTransfer.items]
    .map((item) => (item.webkitGetAsEntry ? item.webkitGetAsEntry() : null))
    .filter(Boolean);
  if (!entries.length) return [...dataTransfer.files].map((file) => ({ file, path: file.name }));
  const out = [];
  const walk = async (entry, base) => {
    if (entry.isFile) {
      const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
      out.push({ file, path: base + entry.name });
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
        if (!batch.length) break;
        for (const child of batch) await walk(child, `${base}${entry.name}/`);
      }
    }
  };
  for (const entry of entries) await walk(entry, "");
  return out;
}
