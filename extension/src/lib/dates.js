// Date ranges for the Dates tab, the same as the shell's /recent and /by-date: UTC, weeks start on
// Monday, each range is [from, to) and the open ones end now.

const DAY = 86_400_000;

function utcMidnight(moment) {
  return new Date(Date.UTC(moment.getUTCFullYear(), moment.getUTCMonth(), moment.getUTCDate()));
}

export const PERIODS = [
  ["today", "Today"],
  ["yesterday", "Yesterday"],
  ["this-week", "This week"],
  ["last-week", "Last week"],
  ["this-month", "This month"],
  ["last-month", "Last month"],
];

export function period(name, now = new Date()) {
  const midnight = utcMidnight(now);
  const monday = new Date(midnight.getTime() - ((midnight.getUTCDay() + 6) % 7) * DAY);
  const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const previousFirst = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
  const ranges = {
    today: [midnight, now],
    yesterday: [new Date(midnight.getTime() - DAY), midnight],
    "this-week": [monday, now],
    "last-week": [new Date(monday.getTime() - 7 * DAY), monday],
    "this-month": [first, now],
    "last-month": [previousFirst, first],
  };
  if (!(name in ranges)) throw new Error(`unknown period ${name}`);
  const [from, to] = ranges[name];
  // Periods that run until now are open: what was added this very second still belongs in them.
  return { from, to, open: to === now };
}

// A calendar year, month (1-12) or day, as [from, to).
export function calendar(year, month, day) {
  if (month === undefined) {
    return { from: new Date(Date.UTC(year, 0, 1)), to: new Date(Date.UTC(year + 1, 0, 1)) };
  }
  if (day === undefined) {
    return { from: new Date(Date.UTC(year, month - 1, 1)), to: new Date(Date.UTC(year, month, 1)) };
  }
  const from = new Date(Date.UTC(year, month - 1, day));
  return { from, to: new Date(from.getTime() + DAY) };
}

// marks stores times as `YYYY-MM-DDTHH:MM:SSZ`: the text the query language compares.
export function isoSeconds(moment) {
  return moment.toISOString().replace(/\.\d{3}Z$/, "Z");
}

// The `bookmark query` expression for bookmarks whose FIELD (added or visited) lies in a range.
export function rangeQuery(field, { from, to, open = false }) {
  if (field !== "added" && field !== "visited") throw new Error(`unknown date field ${field}`);
  const since = `${field} >= ${isoSeconds(from)}`;
  return open ? since : `${since} and ${field} < ${isoSeconds(to)}`;
}

export const MONTHS = [
  "January", "February", "March", "April", "May", "June",
  "July", "August", "September", "October", "November", "December",
];
