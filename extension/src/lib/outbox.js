// Quick adds made while the server cannot be reached are kept here and sent when it is back.
// Nothing is dropped silently: an add the server refuses for good (a 4xx other than a duplicate)
// is moved to `failed` with the server's reason, so the popup can report it as not saved.
//
// `storage` is anything with async get(key) / set(key, value) (chrome.storage.local in the
// extension, a Map in tests); `send` posts one add and resolves to {ok, status, body}.

const KEY = "outbox";
const FAILED = "outboxFailed";
const LIMIT = 500; // a bound, so a long outage cannot fill the extension's storage

export class Outbox {
  constructor(storage) {
    this.storage = storage;
  }

  async pending() {
    return (await this.storage.get(KEY)) ?? [];
  }

  async failed() {
    return (await this.storage.get(FAILED)) ?? [];
  }

  async keep(item) {
    const items = await this.pending();
    if (items.some((kept) => kept.url === item.url)) return items.length;
    if (items.length >= LIMIT) throw new Error(`the offline queue is full (${LIMIT} pages)`);
    items.push({ ...item, keptAt: new Date().toISOString() });
    await this.storage.set(KEY, items);
    return items.length;
  }

  // Sends what is kept, in order. Stops at the first network failure (the server is still away)
  // and keeps the rest. Returns {sent, failed, left}.
  async flush(send) {
    const items = await this.pending();
    const failed = await this.failed();
    let sent = 0;
    let index = 0;
    for (; index < items.length; index += 1) {
      let answer;
      const { keptAt, ...fields } = items[index]; // what the server takes: the add as it was made
      try {
        answer = await send(fields);
      } catch {
        break; // unreachable again: keep this one and the rest
      }
      if (answer.ok || answer.status === 409) {
        sent += 1; // a 409 means it is bookmarked already: nothing is lost
      } else if (answer.status >= 400 && answer.status < 500 && answer.status !== 401 && answer.status !== 403 && answer.status !== 408 && answer.status !== 429) {
        failed.push({ ...items[index], reason: answer.body?.details || answer.body?.error || `HTTP ${answer.status}` });
      } else {
        break; // the server cannot take it now (token, load, restart): try again later
      }
    }
    await this.storage.set(KEY, items.slice(index));
    await this.storage.set(FAILED, failed);
    return { sent, failed: failed.length, left: items.length - index };
  }

  async clearFailed() {
    await this.storage.set(FAILED, []);
  }
}
