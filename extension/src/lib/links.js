// How a bookmark's URL is shown: only web addresses become links. A bookmarklet (javascript:),
// a data:, file: or browser page (about:, chrome:, place:) is text with a Copy button: it is
// copied, never run or opened from the popup.

export function openable(url) {
  return /^https?:\/\//i.test(String(url));
}

// "dead; archived copy from 2020-01-02" for a bookmark whose link died and has a copy in the
// Wayback Machine (`marks bookmark health --wayback`), else null.
export function archivedNote(bookmark) {
  if (!bookmark?.archived_url || !openable(bookmark.archived_url)) return null;
  const day = String(bookmark.archived_at || "").slice(0, 10);
  return { text: `archived copy from ${day}`, href: bookmark.archived_url };
}
