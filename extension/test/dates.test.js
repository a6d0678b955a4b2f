// Date ranges as the shell's /recent and /by-date: UTC, weeks from Monday, [from, to).
import assert from "node:assert/strict";
import { test } from "node:test";

import { PERIODS, calendar, isoSeconds, period, rangeQuery } from "../src/lib/dates.js";

const at = (text) => new Date(text);
const range = (name, now) => {
  const { from, to } = period(name, at(now));
  return [isoSeconds(from), isoSeconds(to)];
};

test("today and yesterday are UTC days", () => {
  assert.deepEqual(range("today", "2026-11-25T10:30:00Z"), ["2026-11-25T00:00:00Z", "2026-11-25T10:30:00Z"]);
  assert.deepEqual(range("yesterday", "2026-11-25T00:00:05Z"), ["2026-11-24T00:00:00Z", "2026-11-25T00:00:00Z"]);
});

test("weeks start on Monday, also when today is Sunday or Monday", () => {
  // 2026-11-29 is a Sunday, 2026-11-23 a Monday.
  assert.deepEqual(range("this-week", "2026-11-29T23:59:59Z"), ["2026-11-23T00:00:00Z", "2026-11-29T23:59:59Z"]);
  assert.deepEqual(range("this-week", "2026-11-23T08:00:00Z"), ["2026-11-23T00:00:00Z", "2026-11-23T08:00:00Z"]);
  assert.deepEqual(range("last-week", "2026-11-23T08:00:00Z"), ["2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z"]);
});

test("months turn over the year", () => {
  assert.deepEqual(range("this-month", "2026-01-15T12:00:00Z"), ["2026-01-01T00:00:00Z", "2026-01-15T12:00:00Z"]);
  assert.deepEqual(range("last-month", "2026-01-15T12:00:00Z"), ["2025-12-01T00:00:00Z", "2026-01-01T00:00:00Z"]);
  assert.deepEqual(range("last-month", "2024-03-31T12:00:00Z"), ["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"]);
});

test("a time zone ahead of UTC does not move the day", () => {
  // 00:30 in UTC+2 is still the previous UTC day.
  assert.deepEqual(range("today", "2026-11-25T00:30:00+02:00"), ["2026-11-24T00:00:00Z", "2026-11-24T22:30:00Z"]);
});

test("calendar years, months (leap February) and days", () => {
  const text = ({ from, to }) => [isoSeconds(from), isoSeconds(to)];
  assert.deepEqual(text(calendar(2024)), ["2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"]);
  assert.deepEqual(text(calendar(2024, 2)), ["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"]);
  assert.deepEqual(text(calendar(2024, 12)), ["2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z"]);
  assert.deepEqual(text(calendar(2024, 2, 29)), ["2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"]);
});

test("every period has a label, and ranges become marks filter expressions", () => {
  assert.deepEqual(PERIODS.map(([name]) => name), ["today", "yesterday", "this-week", "last-week", "this-month", "last-month"]);
  assert.equal(
    rangeQuery("visited", calendar(2024, 5)),
    "visited >= 2024-05-01T00:00:00Z and visited < 2024-06-01T00:00:00Z",
  );
  assert.throws(() => rangeQuery("title", calendar(2024)));
  // A period running until now has no upper bound: a bookmark added this second is in "today".
  assert.equal(rangeQuery("added", period("today", at("2026-11-25T10:30:00.800Z"))), "added >= 2026-11-25T00:00:00Z");
  assert.equal(period("yesterday", at("2026-11-25T10:30:00Z")).open, false);
  assert.throws(() => period("next-week"));
});
