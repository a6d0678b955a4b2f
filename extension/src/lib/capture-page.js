// "Save a snapshot of this page": the page serialised as the user sees it (logged in, after its
// scripts ran), made self-contained and inert. Injected into the page's tab as a classic script
// (so no import or export here), it defines `globalThis.marksCapture`; the Node tests import it
// for the same side effect. Resources are fetched from the page's own context, so its cookies
// apply and pages behind a login keep their pictures; another site's file the page may not read
// (no CORS) is asked of the extension instead (lib/crosssite.js), which may fetch it if the user
// allowed other sites. marks' server sanitises the result again.
(() => {
  const REMOVED = [
    "script", "noscript", "base", "object", "embed", "applet", "frame", "frameset", "portal",
    "template", "iframe", "animate", "set", "animatemotion", "animatetransform",
  ].join(", ");
  const CSS_URL = /url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)/gi;
  const IMPORT = /@import\s+(?:url\(\s*["']?([^"')\s]+)["']?\s*\)|["']([^"']+)["'])\s*([^;]*);/gi;
  const IMPORT_DEPTH = 5;

  // What a browser would run as script if it were a URL: tabs and line breaks anywhere, and
  // leading spaces or control characters, are ignored by URL parsing.
  function isScriptUrl(value) {
    const cleaned = String(value).replace(/[\t\n\r]/g, "").replace(/^[\u0000-\u0020]+/, "").toLowerCase();
    return cleaned.startsWith("javascript:") || cleaned.startsWith("vbscript:");
  }

  // Handlers and script URLs off one element (anything with `attributes` and `removeAttribute`).
  function cleanElement(element) {
    for (const { name, value } of Array.from(element.attributes)) {
      if (name.toLowerCase().startsWith("on") || isScriptUrl(value)) element.removeAttribute(name);
    }
  }

  // CSS that cannot end its <style> early (`<\/style` means the same to CSS).
  function safeCss(text) {
    return text.replace(/<\/(style)/gi, "<\\/$1");
  }

  class Budget {
    constructor(maxBytes) {
      this.left = maxBytes;
      this.omitted = [];
    }
    take(url, size) {
      if (size > this.left) {
        this.omitted.push({ url, reason: `over the ${(this.left / 1048576).toFixed(1)} MB left` });
        return false;
      }
      this.left -= size;
      return true;
    }
    miss(url, reason) {
      this.omitted.push({ url, reason });
    }
  }

  // `fetcher(url)` answers { dataUri } or { text } (as asked) or throws; each URL once a page.
  function resources(fetcher, budget) {
    const seen = new Map();
    const get = (url, kind) => {
      const key = `${kind} ${url}`;
      if (!seen.has(key)) {
        seen.set(key, fetcher(url, kind, budget.left).then(
          (found) => (budget.take(url, (found.dataUri ?? found.text).length) ? found : null),
          (error) => {
            budget.miss(url, error.message || String(error));
            return null;
          }));
      }
      return seen.get(key);
    };
    return {
      dataUri: async (url) => (url.startsWith("data:") ? url : (await get(url, "data"))?.dataUri ?? null),
      text: async (url) => (await get(url, "text"))?.text ?? null,
    };
  }

  // CSS with its @imports and url()s inlined; what cannot be fetched becomes an empty URL.
  async function inlineCss(text, base, fetch, depth = 0) {
    let css = text.replace(/@charset\s+[^;]*;/gi, "");
    for (const match of [...css.matchAll(IMPORT)]) {
      const target = new URL(match[1] || match[2], base).href;
      const media = match[3].trim();
      let sheet = null;
      if (depth < IMPORT_DEPTH) {
        const imported = await fetch.text(target);
        if (imported !== null) sheet = await inlineCss(imported, target, fetch, depth + 1);
      }
      css = css.replace(match[0], sheet === null ? "" : media ? `@media ${media} {${sheet}}` : sheet);
    }
    const found = new Map();
    for (const match of css.matchAll(CSS_URL)) {
      const raw = (match[1] ?? match[2] ?? match[3] ?? "").trim();
      if (!raw || raw.startsWith("#") || raw.startsWith("data:")) continue;
      found.set(match[0], new URL(raw, base).href);
    }
    const uris = await Promise.all([...found.values()].map((url) => fetch.dataUri(url)));
    let index = 0;
    for (const whole of found.keys()) {
      css = css.split(whole).join(`url("${uris[index] ?? "data:,"}")`);
      index += 1;
    }
    return safeCss(css);
  }

  // The candidate of a srcset the browser would be likeliest to pick first: its first one.
  function srcsetFirst(value) {
    return String(value).split(",").map((part) => part.trim().split(/\s+/)[0]).find(Boolean) ?? null;
  }

  // The page's fetch failed without an answer: CORS (another site that does not share the file),
  // or the network. Distinct from an answer such as HTTP 404, which another fetcher would get too.
  class Unreadable extends Error {}

  async function pageFetch(url, kind) {
    let response;
    try {
      response = await fetch(url, { credentials: "include" });
    } catch (error) {
      throw new Unreadable(`the page could not read it (${error.message})`);
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    if (kind === "text") return { text: await response.text() };
    const blob = await response.blob();
    const dataUri = await new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(new Error("could not read the body"));
      reader.readAsDataURL(blob);
    });
    return { dataUri };
  }

  // The extension's fetcher (lib/crosssite.js), over the runtime's messages; `left` is the budget.
  async function extensionFetch(url, kind, left) {
    const runtime = (globalThis.browser ?? globalThis.chrome)?.runtime;
    const answer = await runtime.sendMessage({ type: "capture-fetch", url, kind, maxBytes: left });
    if (!answer) throw new Error("the extension did not answer");
    if (answer.error) throw new Error(answer.error);
    return answer;
  }

  // `first`, then for another site's http(s) file that it could not read, `second`: only there
  // can the extension's fetch (not bound by CORS) succeed where the page's failed.
  function withFallback(first, second, pageOrigin) {
    return async (url, kind, left) => {
      try {
        return await first(url, kind, left);
      } catch (error) {
        const target = new URL(url);
        const http = target.protocol === "http:" || target.protocol === "https:";
        if (!(error instanceof Unreadable) || !http || target.origin === pageOrigin) throw error;
        return second(url, kind, left);
      }
    };
  }

  // The page now, as one inert, self-contained HTML string, with what was left out and why.
  async function capture({
    maxBytes = 20 * 1024 * 1024,
    fetcher = withFallback(pageFetch, extensionFetch, location.origin),
  } = {}) {
    const budget = new Budget(maxBytes);
    const fetch = resources(fetcher, budget);
    const base = document.baseURI;
    const live = Array.from(document.querySelectorAll("img"));
    const root = document.documentElement.cloneNode(true);
    const images = Array.from(root.querySelectorAll("img"));
    images.forEach((image, index) => {
      // What the user sees: the candidate the browser chose, not the first of a srcset.
      const chosen = live[index]?.currentSrc;
      if (chosen) image.setAttribute("src", chosen);
    });
    for (const frame of root.querySelectorAll("iframe")) {
      budget.miss(frame.src || "(inline frame)", "frames are not captured by the extension");
    }
    for (const node of root.querySelectorAll(REMOVED)) node.remove();
    for (const meta of root.querySelectorAll("meta[http-equiv], meta[charset]")) meta.remove();
    const work = [];
    for (const link of root.querySelectorAll("link")) {
      const rel = (link.getAttribute("rel") || "").toLowerCase().split(/\s+/);
      if (!rel.includes("stylesheet") || rel.includes("alternate") || !link.href) {
        link.remove();
        continue;
      }
      work.push((async () => {
        const text = await fetch.text(link.href);
        const style = document.createElement("style");
        if (link.media) style.media = link.media;
        style.textContent = text === null ? "" : await inlineCss(text, link.href, fetch);
        link.replaceWith(style);
      })());
    }
    for (const style of root.querySelectorAll("style")) {
      work.push(inlineCss(style.textContent, base, fetch).then((css) => { style.textContent = css; }));
    }
    for (const element of root.querySelectorAll("[style]")) {
      const value = element.getAttribute("style");
      if (/url\(/i.test(value)) {
        work.push(inlineCss(value, base, fetch).then((css) => element.setAttribute("style", css)));
      }
    }
    for (const image of root.querySelectorAll("img[src], input[src], video[poster]")) {
      const name = image.hasAttribute("poster") ? "poster" : "src";
      const target = new URL(image.getAttribute(name), base).href;
      image.removeAttribute("srcset");
      image.removeAttribute("loading");
      work.push(fetch.dataUri(target).then((uri) => {
        if (uri) image.setAttribute(name, uri);
        else image.removeAttribute(name);
      }));
    }
    for (const source of root.querySelectorAll("picture source")) source.remove();
    for (const source of root.querySelectorAll("source[srcset], source[src]")) {
      const target = source.getAttribute("src") || srcsetFirst(source.getAttribute("srcset"));
      source.removeAttribute("srcset");
      work.push(fetch.dataUri(new URL(target, base).href).then((uri) => {
        if (uri) source.setAttribute("src", uri);
        else source.remove();
      }));
    }
    await Promise.all(work);
    for (const anchor of root.querySelectorAll("a[href], area[href], form[action]")) {
      const name = anchor.tagName.toLowerCase() === "form" ? "action" : "href";
      const value = anchor.getAttribute(name);
      if (!value.startsWith("#") && !isScriptUrl(value)) anchor.setAttribute(name, new URL(value, base).href);
    }
    for (const element of [root, ...root.querySelectorAll("*")]) cleanElement(element);
    const head = root.querySelector("head");
    const charset = document.createElement("meta");
    charset.setAttribute("charset", "utf-8");
    head?.prepend(charset);
    const html = `<!doctype html>\n${root.outerHTML}`;
    return { html, url: location.href, title: document.title, omitted: budget.omitted };
  }

  globalThis.marksCapture = {
    capture, cleanElement, inlineCss, isScriptUrl, resources, safeCss, srcsetFirst, withFallback, Budget, Unreadable,
  };
})();
