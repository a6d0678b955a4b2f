// The list's first page, asked for as soon as the page's head is read: the stylesheet and the ES
// modules load meanwhile, and api.js takes this answer instead of asking again. The URL and the
// token are the ones app.js's first request would send (get("/bookmarks", { limit: 50, offset: 0 })).
// A classic script, not a module: it runs as soon as it arrives, while the modules are fetched.
(() => {
  const path = "/bookmarks?limit=50&offset=0";
  const token = localStorage.getItem("marks-token");
  const headers = token ? { Authorization: `Token ${token}` } : {};
  window.marksEarly = { path, response: fetch(path, { headers }) };
})();
