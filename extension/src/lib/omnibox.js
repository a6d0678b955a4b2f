// Address-bar search with the keyword `mk`: the server's full-text hits become suggestions, and
// Enter opens the best hit. Pure functions; background.js wires them to `browser.omnibox`.
//
// Chromium parses a suggestion's description as XML (so `<`, `&` must be escaped, and <match>
// highlights); Firefox shows it as plain text. `markup` says which one the browser wants.

export const KEYWORD = "mk";
const LIMIT = 6; // what both browsers show without scrolling

export function escapeXml(text) {
  return String(text).replace(/[<>&"']/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&apos;" })[c]);
}

// "[word]" marks a match in a server snippet.
function highlighted(snippet, markup) {
  const parts = String(snippet || "").split(/\[|\]/);
  if (!markup) return parts.join("");
  return parts.map((part, index) => (index % 2 ? `<match>${escapeXml(part)}</match>` : escapeXml(part))).join("");
}

// The server's `/search?fts=1` answer as omnibox suggestions: the bookmark's URL is the content
// (what Enter on that suggestion opens), title and snippet the description.
export function suggestions(result, { markup }) {
  return (result?.hits ?? []).slice(0, LIMIT).map(({ bookmark, snippet }) => {
    const title = (bookmark.starred ? "★ " : "") + (bookmark.title || bookmark.url);
    const words = highlighted(snippet, markup);
    const description = markup
      ? `${escapeXml(title)} <url>${escapeXml(bookmark.url)}</url>${words ? ` <dim>${words}</dim>` : ""}`
      : `${title} — ${bookmark.url}${words ? ` — ${words}` : ""}`;
    return { content: bookmark.url, description };
  });
}

// What Enter opens: a suggestion the user picked carries the URL itself; typed words open the
// best hit of a search for them, or nothing (null) when nothing matches.
export function isOpenable(text) {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

export function bestHit(result) {
  return result?.hits?.[0]?.bookmark?.url ?? null;
}

// The omnibox's disposition as the tabs call that honours it.
export function opening(disposition, url) {
  if (disposition === "newForegroundTab") return ["create", { url, active: true }];
  if (disposition === "newBackgroundTab") return ["create", { url, active: false }];
  return ["update", { url }];
}
