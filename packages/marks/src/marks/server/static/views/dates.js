import { get } from "../js/api.js";
import { h } from "../js/dom.js";

// Dates: added or last visited, year → month → day, each level fetched when opened. Choosing a
// period lists it through the filter language (`added = 2024-05` is all of May 2024).
const LEVELS = ["year", "month", "day"];

async function level(field, depth, parts, ui) {
  const [year, month] = parts;
  const page = await get("/bookmarks/by-date", { field, granularity: LEVELS[depth], year, month });
  const list = h("ul");
  for (const period of page.periods) {
    const item = h("li");
    let opened = null;
    const link = ui.link(`date-${field}-${period.period}`, period.period, period.count, async () => {
      ui.show({
        title: `${field === "added" ? "Added" : "Visited"} ${period.period}`,
        params: { query: `${field} = ${period.period}`, sort: field },
      });
      if (depth < 2 && !opened) {
        opened = await level(field, depth + 1, period.period.split("-").map(Number), ui);
        item.append(opened);
      } else if (opened) {
        opened.hidden = !opened.hidden;
      }
    });
    link.dataset.period = period.period;
    item.append(link);
    list.append(item);
  }
  return list;
}

export default {
  id: "dates",
  title: "Dates",
  async render(container, ui) {
    for (const field of ["added", "visited"]) {
      const section = h("div", { class: "date-field", dataset: { field } });
      let opened = null;
      section.append(ui.link(`dates-${field}`, field === "added" ? "By date added" : "By date visited",
        null, async () => {
          if (!opened) {
            opened = await level(field, 0, [], ui);
            section.append(opened);
          } else {
            opened.hidden = !opened.hidden;
          }
        }));
      container.append(section);
    }
  },
};
