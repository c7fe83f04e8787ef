// Plays an HLS URL in a <video>: with hls.js (vendored, a global `Hls`) where Media Source
// Extensions exist, else natively where the browser plays HLS itself.

export function attachStream(video, url, onError = () => {}) {
  const Hls = window.Hls;
  if (Hls && Hls.isSupported()) {
    const hls = new Hls({ enableWorker: true });
    hls.on(Hls.Events.ERROR, (_event, data) => {
      if (data.fatal) onError(`Playback failed: ${data.details}`);
    });
    hls.loadSource(url);
    hls.attachMedia(video);
    return hls;
  }
  if (video.canPlayType("application/vnd.apple.mpegurl")) {
    video.src = url;
    return { destroy() { video.removeAttribute("src"); } };
  }
  onError("This browser cannot play HLS streams.");
  return { destroy() {} };
}
