// The console's one door to the server: /api/v1 with the bearer token from the sign-in.
//
// The token lives in sessionStorage (this tab only, gone when it closes), never in a cookie:
// the API does not read cookies, so another site cannot make the browser use it. A 401 to a
// request that carried the token ends the session and returns to the sign-in page.

const SESSION_KEY = "console.session";
export const API = "/api/v1";

export class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

let current = null;
try {
  current = JSON.parse(sessionStorage.getItem(SESSION_KEY) || "null");
} catch {
  current = null;
}

const listeners = new Set();

export const session = {
  get user() { return current ? current.user : null; },
  get token() { return current ? current.token : null; },
  get isAdmin() { return Boolean(current && current.user.role === "admin"); },
  onEnd(listener) { listeners.add(listener); },
  async signIn(username, password) {
    const response = await fetch(`${API}/auth/login`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ username, password }),
      credentials: "omit",
    });
    const body = await readJson(response);
    if (!response.ok) throw toError(response, body);
    current = { token: body.token, user: body.user, expires_at: body.expires_at };
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(current));
    return current.user;
  },
  end(message) {
    current = null;
    sessionStorage.removeItem(SESSION_KEY);
    for (const listener of listeners) listener(message);
  },
};

async function readJson(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function toError(response, body) {
  const error = body && body.error;
  if (error) return new ApiError(response.status, error.code, error.message, error.request_id);
  return new ApiError(response.status, "HTTP" + response.status, `the server answered ${response.status}`);
}

function authHeaders(extra = {}) {
  return current ? { Authorization: `Bearer ${current.token}`, ...extra } : { ...extra };
}

function handleUnauthorized(response) {
  if (response.status === 401 && current) session.end("Your session has ended. Sign in again.");
}

/** Calls the API; resolves with the parsed JSON body (null for 204), or throws ApiError. */
export async function api(method, path, { json, query, body, headers, signal } = {}) {
  const url = new URL(API + path, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const init = { method, headers: authHeaders(headers), credentials: "omit", signal };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  } else if (body !== undefined) {
    init.body = body;
  }
  const response = await fetch(url, init);
  if (!response.ok) {
    handleUnauthorized(response);
    throw toError(response, await readJson(response));
  }
  return response.status === 204 ? null : readJson(response);
}

/** GET that resolves with a Blob (previews, downloads of older versions). */
export async function fetchBlob(path, query) {
  const url = new URL(API + path, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null) url.searchParams.set(name, value);
  }
  const response = await fetch(url, { headers: authHeaders(), credentials: "omit" });
  if (!response.ok) {
    handleUnauthorized(response);
    throw toError(response, await readJson(response));
  }
  return response.blob();
}

/** A PUT through XMLHttpRequest, which reports upload progress (fetch does not).
 * Returns { promise, abort }; the promise resolves with the parsed JSON body. */
export function upload(path, data, { headers = {}, onProgress } = {}) {
  const xhr = new XMLHttpRequest();
  const promise = new Promise((resolve, reject) => {
    xhr.open("PUT", API + path);
    for (const [name, value] of Object.entries(authHeaders(headers))) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => onProgress && onProgress(event.loaded);
    xhr.onload = () => {
      let body = null;
      try {
        body = xhr.responseText ? JSON.parse(xhr.responseText) : null;
      } catch {
        body = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else {
        handleUnauthorized(xhr);
        const error = body && body.error;
        reject(new ApiError(xhr.status, error ? error.code : "HTTP" + xhr.status,
          error ? error.message : `the server answered ${xhr.status}`));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, "NetworkError", "the connection failed"));
    xhr.onabort = () => reject(new ApiError(0, "Aborted", "cancelled"));
    xhr.send(data);
  });
  return { promise, abort: () => xhr.abort() };
}

/** The API path of an object. The whole key is one encoded segment (its slashes as %2F, which
 * the server decodes), so a key such as "a/../b" is never collapsed by URL normalisation. */
export function objectPath(bucket, key) {
  return `/buckets/${encodeURIComponent(bucket)}/objects/${encodeURIComponent(key)}`;
}

export function imagePath(bucket, key) {
  return `/buckets/${encodeURIComponent(bucket)}/images/${encodeURIComponent(key)}`;
}

export function bucketPath(bucket, rest = "") {
  return `/buckets/${encodeURIComponent(bucket)}${rest}`;
}

/** A presigned URL: works without credentials for one method on one object until it expires. */
export function presign(bucket, key, method = "GET", expiresIn = 3600) {
  return api("POST", "/presign", { json: { bucket, key, method, expires_in: expiresIn } });
}

/** Saves an object to disk through a short-lived presigned GET URL: the browser downloads it
 * itself (streamed to disk, any size), with no token in the URL's query beyond the signature. */
export async function download(bucket, key) {
  const { url } = await presign(bucket, key, "GET", 300);
  clickLink(url, key.split("/").pop() || "download");
}

/** Older versions cannot be presigned: fetched with the token, saved from a Blob. */
export async function downloadVersion(bucket, key, versionId) {
  const blob = await fetchBlob(objectPath(bucket, key), { version_id: versionId });
  const url = URL.createObjectURL(blob);
  clickLink(url, key.split("/").pop() || "download");
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function clickLink(url, name) {
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.rel = "noopener";
  document.body.append(link);
  link.click();
  link.remove();
}
