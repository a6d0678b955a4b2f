// Options: where marks serve is, the pairing token, visit counting, and the shortcuts that the
// browser did not assign (reported here with a way to set them).

import { Client } from "./lib/api.js";
import { OTHER_SITES } from "./lib/crosssite.js";
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

// "Include images and styles from other sites": the optional host permissions, asked right in
// the click (a user gesture, which the browser requires), and the setting that the capture uses
// them. Off, only the setting goes: Chromium, asked to give "all sites" back, also drops the
// extension's own hosts (marks serve on 127.0.0.1), so the browser keeps the access until the
// user removes it in its extension settings.
function sayOtherSites(message, ok) {
  $("other-sites-result").textContent = message;
  $("other-sites-result").className = ok ? "ok" : "bad";
}

function onOtherSites(event) {
  if (!event.target.checked) {
    save({ otherSites: false }).then(() => sayOtherSites("Other sites' files are left out of snapshots", true));
    return;
  }
  browser.permissions.request(OTHER_SITES).then(
    async (allowed) => {
      await save({ otherSites: allowed });
      $("other-sites").checked = allowed;
      if (allowed) sayOtherSites("Snapshots include images and styles from other sites", true);
      else sayOtherSites("The browser did not allow access to other sites", false);
    },
    (error) => {
      $("other-sites").checked = false;
      sayOtherSites(error.message, false);
    },
  );
}

async function showOtherSites() {
  const { otherSites } = await load();
  $("other-sites").checked = otherSites && (await browser.permissions.contains(OTHER_SITES));
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
  $("other-sites").addEventListener("click", onOtherSites);
  browser.permissions.onAdded?.addListener(showOtherSites);
  browser.permissions.onRemoved?.addListener(showOtherSites);
  await showOtherSites();
  await shortcuts();
}

start();
