// "Undo" after a destructive change: a toast with an Undo button that asks the server to reverse
// the last change (POST /undo) and then says what came back. The toast stays until the next
// change replaces it or it is closed: undo is there as long as the server's journal keeps it.
import { request } from "./api.js";
import { h } from "./dom.js";

function toastElement() {
  let element = document.querySelector("#toast");
  if (!element) {
    element = h("div", { id: "toast", role: "status", hidden: true });
    document.body.append(element);
  }
  return element;
}

export function showToast(text, actions = []) {
  const element = toastElement();
  const close = h("button", { type: "button", class: "toast-close", title: "Close", onclick: () => { element.hidden = true; } }, "×");
  element.replaceChildren(h("span", { class: "toast-text" }, text), ...actions, close);
  element.hidden = false;
}

export async function undoLast(refresh) {
  try {
    const report = await request("POST", "/undo");
    showToast([report.message, ...report.notes].join(" — "));
  } catch (error) {
    showToast(`Undo failed: ${error.message}`);
  }
  await refresh();
}

export function offerUndo(text, refresh) {
  const button = h("button", { type: "button", class: "toast-undo", onclick: () => undoLast(refresh) }, "Undo");
  showToast(text, [button]);
}
