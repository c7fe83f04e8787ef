// The video panel of an object: a thumbnail grid, "package for streaming" (an HLS job whose
// progress is polled), playback of the packaged output in the page, and share links.
//
// Playback goes through a share (POST /videos/shares): the player fetches playlists and
// segments from the share's URL, which needs no Authorization header, so hls.js works as is.

import { api, objectPath, fetchBlob } from "../api.js";
import { h, replace, button, toast, progressBar } from "../ui.js";
import { shareDialog } from "./links.js";
import { attachStream } from "./player.js";

const VIDEO_EXTENSIONS = /\.(mp4|m4v|mov|mkv|webm|ts)$/i;
const POLL_MS = 700;

export function isVideo(object) {
  return object.content_type.startsWith("video/") || VIDEO_EXTENSIONS.test(object.key);
}

function thumbnails(bucket, key) {
  const grid = h("div", { class: "thumb-grid", "aria-live": "polite" });
  const make = button("Make thumbnails", async () => {
    make.disabled = true;
    replace(grid, h("p", { class: "muted", role: "status", text: "Making thumbnails…" }));
    try {
      const times = [0, 1, 2, 4];
      const made = await Promise.all(times.map((at) => api("POST", "/videos/thumbnails", {
        json: { bucket, key, at_seconds: at, width: 320, target_key: `${key}.thumbs/${at}s.jpg` },
      })));
      const images = await Promise.all(made.map((object) => fetchBlob(objectPath(bucket, object.key))));
      replace(grid, images.map((blob, i) => h("figure", { class: "thumb" },
        h("img", { src: URL.createObjectURL(blob), alt: `Frame at ${times[i]} s` }),
        h("figcaption", { text: `${times[i]} s` }))));
    } catch (err) {
      replace(grid, h("p", { class: "form-error", role: "alert", text: `No thumbnails: ${err.message}` }));
    } finally {
      make.disabled = false;
    }
  });
  return h("div", {}, h("div", { class: "actions left" }, make,
    h("span", { class: "hint", text: "Stored next to the video under …/" + key.split("/").pop() + ".thumbs/" })), grid);
}

export function videoPanel(bucket, key) {
  const status = h("p", { class: "muted", role: "status" });
  const runner = h("p", { class: "muted", "aria-label": "Packaging worker", hidden: true });
  const bar = progressBar("Packaging progress");
  bar.hidden = true;
  const stage = h("div", { class: "player-stage" });
  const actions = h("div", { class: "actions left" });
  let currentJob = null;
  let player = null;

  const play = async (job) => {
    try {
      const share = await api("POST", "/videos/shares", { json: { job_id: job.job_id, expires_in: 3600 } });
      const video = h("video", { controls: true, muted: true, playsinline: true, "aria-label": `Playback of ${key}`, class: "player" });
      replace(stage, video);
      if (player) player.destroy();
      player = attachStream(video, share.hls_url, (message) => { status.textContent = message; });
      video.play().catch(() => {});
    } catch (err) {
      status.textContent = `Cannot play: ${err.message}`;
    }
  };

  const showJob = (job) => {
    currentJob = job;
    const percent = Math.round((job.progress || 0) * 100);
    bar.hidden = job.status === "completed";
    bar.value = job.progress || 0;
    const words = { queued: "Waiting to be packaged", processing: `Packaging… ${percent}%`,
      completed: "Packaged for streaming (HLS)", failed: `Packaging failed: ${job.error || "unknown error"}` };
    status.textContent = words[job.status] || job.status;
    // Which run this is and where it runs: a media fleet worker, or the server itself.
    runner.hidden = !job.attempts;
    runner.textContent = `Attempt ${job.attempts || 0}, ` +
      (job.worker ? `on worker ${job.worker}` : "in the server");
    replace(actions,
      job.status === "completed" ? button("Play", () => play(job), { kind: "primary", icon: "▶" }) : null,
      job.status === "completed" ? button("Share video", () => shareDialog(job), { icon: "⚭" }) : null,
      ["completed", "failed"].includes(job.status) ? button("Package again", packageVideo) : null,
      ["queued", "processing"].includes(job.status) ? button("Cancel packaging", async () => {
        await api("DELETE", `/videos/jobs/${encodeURIComponent(job.job_id)}`).catch((err) => toast(err.message, "error"));
        status.textContent = "Packaging cancelled.";
        replace(actions, button("Package for streaming", packageVideo, { kind: "primary" }));
        bar.hidden = true;
      }) : null);
  };

  const poll = async (jobId) => {
    while (document.body.contains(status)) {
      const job = await api("GET", `/videos/jobs/${encodeURIComponent(jobId)}`);
      if (currentJob && currentJob.job_id !== jobId) return;
      showJob(job);
      if (!["queued", "processing"].includes(job.status)) return;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  };

  async function packageVideo() {
    try {
      replace(actions);
      status.textContent = "Starting a packaging job…";
      const job = await api("POST", "/videos/jobs", { json: { bucket, key, formats: ["hls"] } });
      showJob(job);
      await poll(job.job_id);
    } catch (err) {
      status.textContent = `Packaging failed: ${err.message}`;
      replace(actions, button("Package for streaming", packageVideo, { kind: "primary" }));
    }
  }

  // The latest job of this object, if any, so a packaged video plays without packaging again.
  api("GET", "/videos/jobs", { query: { bucket } }).then(({ jobs }) => {
    const mine = jobs.filter((job) => job.key === key && (job.params?.formats || ["hls"]).includes("hls"))
      .sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
    if (mine.length) {
      showJob(mine[0]);
      if (["queued", "processing"].includes(mine[0].status)) poll(mine[0].job_id);
    } else {
      status.textContent = "Not packaged for streaming yet.";
      replace(actions, button("Package for streaming", packageVideo, { kind: "primary" }));
    }
  }).catch((err) => {
    status.textContent = `Video jobs unavailable: ${err.message}`;
  });

  return h("section", { class: "card", "aria-labelledby": "video-title" },
    h("h2", { id: "video-title", text: "Video" }),
    stage, status, runner, bar, actions,
    h("h3", { text: "Thumbnails" }), thumbnails(bucket, key));
}
