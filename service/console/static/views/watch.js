// The public player: #/watch?src=/api/v1/videos/play/<token>/<path>. A share link opened by
// anyone, with no sign-in: the token in the path is the only credential.

import { h } from "../ui.js";
import { attachStream } from "./player.js";

const PLAY_PREFIX = "/api/v1/videos/play/";

export function watchView(src) {
  const status = h("p", { class: "muted", role: "status" });
  const page = h("div", { class: "watch-page" },
    h("header", { class: "watch-head" }, h("span", { class: "logo", "aria-hidden": "true" }), h("h1", { text: "Shared video" })));
  if (!src.startsWith(PLAY_PREFIX) || src.includes("..")) {
    status.textContent = "This link is not a video share link.";
    page.append(status);
    return page;
  }
  const video = h("video", { controls: true, muted: true, playsinline: true, class: "player", "aria-label": "Shared video" });
  page.append(h("div", { class: "player-stage" }, video), status);
  attachStream(video, src, (message) => {
    status.textContent = `${message}. The share may have expired or been revoked.`;
  });
  video.play().catch(() => {});
  return page;
}
