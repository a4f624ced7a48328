// A session's canonical stream (GET /agents/{agent}/{instance}?view=stream): live through the
// browser's EventSource, which reconnects by itself with Last-Event-ID after the server goes
// away; or a past range read with fetch (the earlier part of a long session).
//
// Event ids are "<seq>:<n>" (the n-th event projected from record seq). Both readers pass an
// event on only if its id is past the last one passed on, so a reconnect can repeat nothing.

import { agentPath, renewSignIn, storedToken } from "./api.js";

const TYPES = ["start", "delta", "full", "done"];

/** [seq, n] of an event id; null for none. */
export function position(id) {
  if (!id) return null;
  const [seq, n] = id.split(":").map(Number);
  return Number.isFinite(seq) && Number.isFinite(n) ? [seq, n] : null;
}

export function after(a, b) {
  return b === null || a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
}

function streamUrl(key, query) {
  const params = new URLSearchParams({ session: key.session, view: "stream", ...query });
  return `${agentPath(key)}?${params}`;
}

/** The live stream of a session, from record `from` on (its events, then what comes). */
export class LiveStream {
  constructor(key, from, { onEvent, onProgress, onState }) {
    this.key = key;
    this.from = from;
    this.last = null; // [seq, n] of the last event passed on
    this.onEvent = onEvent;
    this.onProgress = onProgress;
    this.onState = onState;
    this.source = null;
    this.retry = null;
    this.closed = false;
  }

  open() {
    // A fresh EventSource (the first, or after the browser gave up) starts at the record of
    // the last event passed on, whose events are then skipped up to it.
    const from = this.last ? this.last[0] - 1 : this.from;
    const source = new EventSource(streamUrl(this.key, { follow: "true", after: from }));
    this.source = source;
    for (const type of TYPES) {
      source.addEventListener(type, (message) => this.received(message));
    }
    source.addEventListener("progress", (message) => this.onProgress(JSON.parse(message.data)));
    source.onopen = () => this.onState("live");
    source.onerror = () => {
      if (this.closed) return;
      if (source.readyState === EventSource.CLOSED) {
        // Refused for good (e.g. a 503 while the server starts, or a 401: the sign-in's
        // cookie expired): try again, with a fresh cookie if the tab has the token.
        this.onState("reconnecting");
        this.retry = setTimeout(() => renewSignIn().finally(() => this.closed || this.open()), 2000);
      } else {
        this.onState("reconnecting"); // the browser reconnects by itself, with Last-Event-ID
      }
    };
  }

  received(message) {
    const at = position(message.lastEventId);
    if (at && !after(at, this.last)) return; // sent before: a resumed stream repeats nothing
    if (at) this.last = at;
    this.onEvent(message.type, JSON.parse(message.data), at);
  }

  close() {
    this.closed = true;
    clearTimeout(this.retry);
    if (this.source) this.source.close();
  }
}

/** The events of records from+1 .. until (a past part of the log), read once with fetch. */
export async function readRange(key, from, until, onEvent) {
  const controller = new AbortController();
  const token = storedToken();
  const response = await fetch(streamUrl(key, { after: from }), {
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    signal: controller.signal,
  });
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        const at = position(frame.id);
        if (!at || !TYPES.includes(frame.event)) continue;
        if (at[0] > until) return; // past the range: the rest is already shown
        onEvent(frame.event, JSON.parse(frame.data), at);
      }
    }
  } finally {
    controller.abort();
  }
}

function parseFrame(text) {
  const frame = { id: null, event: "message", data: "" };
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const field = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") frame.data += frame.data ? `\n${value}` : value;
    else if (field === "id" || field === "event") frame[field] = value;
  }
  return frame;
}
