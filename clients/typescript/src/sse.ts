/**
 * Server-sent events read from a byte stream, by the WHATWG rules a browser's
 * `EventSource` follows: fields `event`, `data`, `id`, `retry`; comments ignored; a blank
 * line dispatches. Read here rather than through `EventSource`, which cannot send an
 * `Authorization` header.
 */

/** One dispatched event. `id` is the last event id in force when it was dispatched. */
export interface SseEvent {
  event: string;
  data: string;
  id: string;
}

/** What the parser reports: an event, or a new reconnection time from a `retry:` field. */
export type SseItem = { kind: "event"; value: SseEvent } | { kind: "retry"; ms: number };

/**
 * An incremental parser: feed it text as it arrives, take the items each feed completes.
 *
 * @example
 * const parser = new SseParser();
 * for (const item of parser.feed("id: 1\ndata: {}\n\n")) console.log(item);
 */
export class SseParser {
  /** The last `id:` seen (kept across events, as `EventSource.lastEventId`). */
  lastEventId: string;
  private buffer = "";
  private eventType = "";
  private data: string[] = [];
  private sawCarriageReturn = false;

  /** The last event id as of the last complete frame: where a resumed stream must start. */
  private committedId: string;

  constructor(lastEventId = "") {
    this.lastEventId = lastEventId;
    this.committedId = lastEventId;
  }

  /**
   * Forget a frame cut short (a dropped connection): its `id:` may have been read without
   * its event, and resuming after it would skip the event.
   */
  reset(): void {
    this.buffer = "";
    this.eventType = "";
    this.data = [];
    this.sawCarriageReturn = false;
    this.lastEventId = this.committedId;
  }

  feed(chunk: string): SseItem[] {
    let text = chunk;
    // A CRLF split between two chunks: its LF ends no second line.
    if (this.sawCarriageReturn && text.startsWith("\n")) text = text.slice(1);
    this.sawCarriageReturn = false;
    this.buffer += text;
    const items: SseItem[] = [];
    let start = 0;
    for (;;) {
      const match = /\r\n|\r|\n/g;
      match.lastIndex = start;
      const found = match.exec(this.buffer);
      if (found === null) break;
      // A lone CR at the very end may be the first half of a CRLF: wait for more.
      if (found[0] === "\r" && found.index === this.buffer.length - 1) {
        this.sawCarriageReturn = true;
        this.processLine(this.buffer.slice(start, found.index), items);
        start = this.buffer.length;
        break;
      }
      this.processLine(this.buffer.slice(start, found.index), items);
      start = found.index + found[0].length;
    }
    this.buffer = this.buffer.slice(start);
    return items;
  }

  private processLine(line: string, items: SseItem[]): void {
    if (line === "") {
      if (this.data.length > 0) {
        items.push({
          kind: "event",
          value: { event: this.eventType || "message", data: this.data.join("\n"), id: this.lastEventId },
        });
      }
      this.data = [];
      this.eventType = "";
      this.committedId = this.lastEventId;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.eventType = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.lastEventId = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) items.push({ kind: "retry", ms: Number(value) });
        break;
      default:
        break;
    }
  }
}

/** The items of an SSE byte stream, as they arrive. */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
  parser: SseParser = new SseParser(),
): AsyncGenerator<SseItem> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      yield* parser.feed(decoder.decode(value, { stream: true }));
    }
    yield* parser.feed(decoder.decode());
  } finally {
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
