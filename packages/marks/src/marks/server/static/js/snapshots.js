// A bookmark's snapshots in the editor dialog: the list (newest first), "Take a snapshot now"
// (marks fetches the page), and a viewer that opens one in a sandboxed frame. The frame's
// `sandbox` attribute and the server's `Content-Security-Policy: sandbox` both keep everything
// in the snapshot from running: it is someone else's page.
import { get, request } from "./api.js";
import { h } from "./dom.js";

const $ = (selector) => document.querySelector(selector);

function kilobytes(size) {
  return `${Math.max(1, Math.round(size / 1024))} KB`;
}

function open(snapshot) {
  const frame = h("iframe", { id: "snapshot-frame", title: `Snapshot ${snapshot.id}` });
  frame.setAttribute("sandbox", ""); // no scripts, no same-origin, no forms, no popups
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.src = `/snapshots/${snapshot.id}`;
  $("#snapshot-title").textContent = `${snapshot.title || snapshot.url} (${snapshot.taken_at})`;
  $("#snapshot-frame-box").replaceChildren(frame);
  $("#snapshot-viewer").showModal();
}

function item(snapshot) {
  const left = snapshot.omitted.length ? `, ${snapshot.omitted.length} left out` : "";
  return h("li", { class: "snapshot", dataset: { id: String(snapshot.id) } },
    h("button", { type: "button", class: "open-snapshot", onclick: () => open(snapshot) },
      snapshot.taken_at.replace("T", " ").replace("Z", "")),
    h("span", { class: "meta" }, ` ${snapshot.source}, ${kilobytes(snapshot.size)}${left}`));
}

export async function showSnapshots(bookmark) {
  const box = $("#edit-snapshots");
  box.hidden = !bookmark;
  if (!bookmark) return;
  const list = $("#snapshot-list");
  list.replaceChildren();
  $("#snapshot-status").textContent = "";
  const found = await get(`/bookmarks/${bookmark.id}/snapshots`);
  list.replaceChildren(...found.map(item));
  box.dataset.count = String(found.length);
  if (!found.length) $("#snapshot-status").textContent = "No snapshots yet.";
}

export async function takeSnapshot(bookmark) {
  $("#snapshot-status").textContent = "Taking a snapshot…";
  try {
    await request("POST", `/bookmarks/${bookmark.id}/snapshots`, { json: {} });
    await showSnapshots(bookmark);
    $("#snapshot-status").textContent = "Snapshot taken.";
  } catch (error) {
    $("#snapshot-status").textContent = error.message;
  }
}

export function closeViewer() {
  $("#snapshot-frame-box").replaceChildren();
  $("#snapshot-viewer").close();
}
