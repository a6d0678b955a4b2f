// Options: where marks serve is, the pairing token, visit counting, and the shortcuts that the
// browser did not assign (reported here with a way to set them).

import { Client } from "./lib/api.js";
import { api, checkServer, load, originPattern, save } from "./lib/settings.js";

const browser = api();
const $ = (id) => document.getElementById(id);
const LOOPBACK = ["127.0.0.1", "localhost"];
const isFirefox = browser.runtime.getURL("").startsWith("moz-extension:");
const SHORTCUTS_PAGE = isFirefox ? "about:addons" : "chrome://extensions/shortcuts";

// Chromium gives the popup command no description of its own.
function label(command) {
  return command.name === "_execute_action" ? "Open the marks popup" : command.description || command.name;
}

function report(message, ok) {
  $("result").textContent = message;
  $("result").className = ok ? "ok" : "bad";
}

// Other servers than loopback need their origin granted; asked only when the user sets one.
async function grant(server) {
  if (LOOPBACK.includes(new URL(server).hostname)) return true;
  return browser.permissions.request({ origins: [originPattern(server)] });
}

async function values() {
  const server = checkServer($("server").value || "http://127.0.0.1:8000");
  return { server, token: $("token").value.trim(), countVisits: $("count-visits").checked };
}

async function onSave(event) {
  event.preventDefault();
  try {
    const chosen = await values();
    if (!(await grant(chosen.server))) {
      report(`Not saved: the browser did not allow access to ${chosen.server}`, false);
      return;
    }
    await save(chosen);
    report("Saved", true);
    browser.runtime.sendMessage({ type: "flush" }).catch(() => {});
  } catch (error) {
    report(error.message, false);
  }
}

async function onTest() {
  try {
    const chosen = await values();
    const stats = await new Client(chosen).stats();
    report(`Connected: ${stats.bookmarks} bookmarks`, true);
  } catch (error) {
    report(error.message, false);
  }
}

async function shortcuts() {
  const commands = await browser.commands.getAll();
  $("shortcut-list").replaceChildren(
    ...commands.map((command) => {
      const li = document.createElement("li");
      li.textContent = `${label(command)}: ${command.shortcut || "not set"}`;
      return li;
    }),
  );
  const missing = commands.filter((command) => !command.shortcut);
  if (missing.length) {
    $("unassigned").hidden = false;
    $("unassigned-text").textContent =
      `The browser did not assign ${missing.length === 1 ? "this shortcut" : "these shortcuts"} ` +
      `(it uses the keys itself): ${missing.map(label).join("; ")}. ` +
      "Choose other keys in the browser's shortcut settings.";
    $("shortcuts-hint").textContent = SHORTCUTS_PAGE;
  }
}

async function start() {
  const settings = await load();
  $("server").value = settings.server;
  $("token").value = settings.token;
  $("count-visits").checked = settings.countVisits;
  $("options").addEventListener("submit", onSave);
  $("test").addEventListener("click", onTest);
  $("open-shortcuts").addEventListener("click", () => browser.tabs.create({ url: SHORTCUTS_PAGE }));
  await shortcuts();
}

start();
