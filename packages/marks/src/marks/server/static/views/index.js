// The sidebar's views, in order. A view is one module exporting
//   { id, title, render(container, ui) }
// that fills its section and calls ui.show({ title, params }) to choose what the list shows.
// Adding a view (health, queue, ...) is one file here and one line below.
import collections from "./collections.js";
import dates from "./dates.js";
import health from "./health.js";
import queue from "./queue.js";
import tags from "./tags.js";
import trash from "./trash.js";

export default [collections, queue, health, tags, dates, trash];
