// What the toolbar badge shows for a page: nothing for an unknown page, a mark for a bookmarked
// one, a star for a starred one, "!" when the server cannot be reached, "+" briefly after a quick add.

export const STATES = {
  unknown: { text: "", color: "#00000000", title: "Not bookmarked" },
  bookmarked: { text: "✓", color: "#2f7d32", title: "Bookmarked in marks" },
  starred: { text: "★", color: "#b8860b", title: "Bookmarked and starred in marks" },
  offline: { text: "!", color: "#b00020", title: "marks serve cannot be reached" },
  saved: { text: "+", color: "#1565c0", title: "Added to marks" },
  queued: { text: "…", color: "#6d4c41", title: "Kept offline: sent when marks serve is back" },
};

export function stateFor(bookmark) {
  if (!bookmark) return "unknown";
  return bookmark.starred ? "starred" : "bookmarked";
}

// Remembers one lookup per page, so switching tabs never asks the server again; a navigation or
// a change made through the extension replaces the entry.
export class LookupCache {
  constructor(limit = 200) {
    this.limit = limit;
    this.entries = new Map();
  }

  get(key) {
    return this.entries.get(key);
  }

  has(key) {
    return this.entries.has(key);
  }

  set(key, bookmark) {
    this.entries.delete(key);
    this.entries.set(key, bookmark ?? null);
    while (this.entries.size > this.limit) {
      this.entries.delete(this.entries.keys().next().value);
    }
  }

  forget(key) {
    this.entries.delete(key);
  }
}
