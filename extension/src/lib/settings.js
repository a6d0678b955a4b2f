// The extension's settings, in storage.sync where the browser offers it (they follow the user).

export const DEFAULTS = {
  server: "http://127.0.0.1:8000",
  token: "",
  countVisits: false,
  otherSites: false, // "Include images and styles from other sites" (also needs the permission)
};

export function api() {
  return globalThis.browser ?? globalThis.chrome;
}

export async function load() {
  const stored = await api().storage.local.get(Object.keys(DEFAULTS));
  return { ...DEFAULTS, ...stored };
}

export async function save(values) {
  await api().storage.local.set(values);
}

// The origin the host permission is asked for: "http://127.0.0.1:8000/*".
export function originPattern(server) {
  const url = new URL(server);
  return `${url.protocol}//${url.hostname}${url.port ? `:${url.port}` : ""}/*`;
}

export function checkServer(text) {
  let url;
  try {
    url = new URL(String(text).trim());
  } catch {
    throw new Error("the server URL is not a URL (example: http://127.0.0.1:8000)");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error("the server URL must start with http:// or https://");
  }
  return `${url.protocol}//${url.host}`;
}
