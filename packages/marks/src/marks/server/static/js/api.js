// The REST API as the web UI uses it. On loopback the UI needs no token; when the server asks
// for one (401), the UI asks the person once and keeps it in this browser's localStorage.
const KEY = "marks-token";

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.details ? body.details : (body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export function token() {
  return localStorage.getItem(KEY) || "";
}

function headers(extra = {}) {
  const result = { ...extra };
  if (token()) result.Authorization = `Token ${token()}`;
  return result;
}

// The answer first.js asked for before the modules loaded, once, if it is for this URL.
function early(method, path) {
  const asked = window.marksEarly;
  if (method !== "GET" || !asked || asked.path !== path) return null;
  window.marksEarly = null;
  return asked.response;
}

export async function request(method, path, { json, body, type } = {}) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const sent = token();
    const options = { method, headers: headers() };
    if (json !== undefined) {
      options.body = JSON.stringify(json);
      options.headers["Content-Type"] = "application/json";
    } else if (body !== undefined) {
      options.body = body;
      options.headers["Content-Type"] = type || "application/octet-stream";
    }
    const response = await ((attempt === 0 && early(method, path)) || fetch(path, options));
    if (response.status === 401 && attempt === 0) {
      if (token() && token() !== sent) continue; // another request asked meanwhile: reuse it
      const given = window.prompt("This marks server needs its API token (marks config token):");
      if (!given) throw new ApiError(401, { error: "Unauthorized", details: "no token given" });
      localStorage.setItem(KEY, given.trim());
      continue;
    }
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }
}

export const get = (path, params = {}) => {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(name, value);
  }
  const text = query.toString();
  return request("GET", text ? `${path}?${text}` : path);
};

// Downloads: a plain link streams from the server; with a token the file is fetched first.
export async function download(fmt) {
  const response = await fetch(`/export/${fmt}`, { headers: headers() });
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const url = URL.createObjectURL(await response.blob());
  const link = Object.assign(document.createElement("a"), { href: url, download: `marks.${fmt}` });
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
