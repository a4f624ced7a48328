/**
 * A session's SSE stream that reconnects: over `fetch` (so it can send `Authorization`),
 * resumed with `Last-Event-ID` after a cut (a dropped connection, a restarted server), with
 * backoff between attempts, so the events read form one sequence with no gap and no
 * duplicate. Abortable with an `AbortSignal`.
 */

import { TetherError, errorFromFetch, errorFromResponse } from "./errors.js";
import { SseParser, readSse } from "./sse.js";

/** One event of a session's stream; `data` is its JSON payload, parsed. */
export interface StreamEvent<T = unknown> {
  /** The SSE event name: a record's kind (`message_appended`, ...), a stream event's type, `progress`, `child`. */
  event: string;
  /** The event id to resume after (`Last-Event-ID`): a record seq, or `<seq>:<n>` in the stream view. */
  id: string;
  data: T;
}

/** How long to wait between reconnection attempts. */
export interface Backoff {
  /** The first wait, in ms (default: the server's `retry:` field, else 1000). */
  initialMs?: number;
  /** The longest wait, in ms (default 30000). */
  maxMs?: number;
  /** Each failed attempt in a row multiplies the wait by this (default 2). */
  factor?: number;
  /** Give up (throw the last error) after this many failed attempts in a row (default: never). */
  maxAttempts?: number;
}

/** Where a stream reads from and how. */
export interface StreamOptions {
  /** The session (default `default`). */
  session?: string;
  /** `records` (the log, default) or `stream` (canonical stream events). */
  view?: "records" | "stream";
  /** Keep following once the session is at rest (default true); waits for a session not created yet. */
  follow?: boolean;
  /** Merge the subagents' events in. */
  children?: boolean;
  /** Start after this record seq. */
  after?: number;
  /** Resume after this event id (as a previous stream gave it). */
  lastEventId?: string;
  /** Stops the stream: the iteration ends, without an error. */
  signal?: AbortSignal;
  backoff?: Backoff;
  /** Told each time a connection is answered (the first, and each after a reconnection). */
  onOpen?: () => void;
  /** Told of each failure that will be retried, and the wait before the retry. */
  onRetry?: (error: TetherError, delayMs: number) => void;
}

/** What a stream needs from its client: how to fetch a path. */
export interface StreamTransport {
  fetchStream(path: string, headers: Record<string, string>, signal: AbortSignal): Promise<Response>;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Whether another attempt may succeed: no answer, a server that is restarting or busy. */
function retryable(error: TetherError): boolean {
  return error.status === 0 ? error.type === "network" : [408, 429, 502, 503, 504].includes(error.status);
}

function parse(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return data;
  }
}

/**
 * The events of a session's stream, reconnecting after a cut until `signal` aborts or (not
 * following) the session comes to rest.
 *
 * @example
 * for await (const event of streamSession(transport, "/agents/assistant/me", { signal })) {
 *   console.log(event.id, event.event, event.data);
 * }
 */
export async function* streamSession(
  transport: StreamTransport,
  path: string,
  options: StreamOptions = {},
): AsyncGenerator<StreamEvent> {
  const follow = options.follow ?? true;
  const query = new URLSearchParams();
  if (options.session !== undefined) query.set("session", options.session);
  if (options.view !== undefined) query.set("view", options.view);
  if (follow) query.set("follow", "true");
  if (options.children) query.set("children", "true");
  if (options.after !== undefined) query.set("after", String(options.after));
  const url = query.size > 0 ? `${path}?${query}` : path;
  const parser = new SseParser(options.lastEventId ?? "");
  const backoff = options.backoff ?? {};
  const factor = backoff.factor ?? 2;
  const maxMs = backoff.maxMs ?? 30_000;
  let serverRetryMs = 1000;
  let failures = 0;
  const outer = options.signal;
  while (!outer?.aborted) {
    // One controller per attempt: aborting the caller's signal aborts it too.
    const attempt = new AbortController();
    const forward = (): void => attempt.abort(outer?.reason);
    outer?.addEventListener("abort", forward, { once: true });
    let failure: TetherError | undefined;
    parser.reset();
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (parser.lastEventId !== "") headers["Last-Event-ID"] = parser.lastEventId;
      let response: Response;
      try {
        response = await transport.fetchStream(url, headers, attempt.signal);
      } catch (error) {
        throw error instanceof TetherError ? error : errorFromFetch(error, attempt.signal);
      }
      if (!response.ok) throw await errorFromResponse(response);
      if (response.body === null) throw new TetherError("invalid_response", "a stream without a body", response.status);
      options.onOpen?.();
      try {
        for await (const item of readSse(response.body, parser)) {
          if (item.kind === "retry") {
            serverRetryMs = item.ms;
            continue;
          }
          failures = 0; // a connection that delivers has recovered
          const { event, id, data } = item.value;
          yield { event, id, data: parse(data) };
        }
      } catch (error) {
        throw error instanceof TetherError ? error : errorFromFetch(error, attempt.signal);
      }
      // A clean end: a stream that does not follow ends once the session is at rest.
      if (!follow) return;
      failure = new TetherError("network", "the stream ended", 0);
    } catch (error) {
      if (outer?.aborted) return;
      if (!(error instanceof TetherError) || !retryable(error)) throw error;
      failure = error;
    } finally {
      outer?.removeEventListener("abort", forward);
      attempt.abort();
    }
    failures += 1;
    if (backoff.maxAttempts !== undefined && failures > backoff.maxAttempts) throw failure;
    const base = backoff.initialMs ?? serverRetryMs;
    const delay = Math.min(maxMs, base * factor ** (failures - 1));
    options.onRetry?.(failure, delay);
    await sleep(delay, outer ?? new AbortController().signal);
  }
}

/** Callbacks of {@link subscribe}. */
export interface SubscribeHandlers {
  onEvent: (event: StreamEvent) => void;
  /** The stream failed for good (not a retried cut, not an abort). */
  onError?: (error: TetherError) => void;
  /** The stream ended (at rest without `follow`, after `close()`, or after `onError`). */
  onClose?: () => void;
}

/** A running subscription: `close()` stops it; `done` settles once it has stopped. */
export interface Subscription {
  close(): void;
  readonly done: Promise<void>;
  /** The id of the last event delivered: where a later subscription resumes. */
  readonly lastEventId: string;
}

/**
 * Framework-free subscription: calls `onEvent` for each event of the session's stream,
 * reconnecting after a cut with `Last-Event-ID`, until `close()` or `options.signal`.
 *
 * @example
 * const sub = subscribe(transport, "/agents/assistant/me", { onEvent: (e) => console.log(e) });
 * sub.close();
 */
export function subscribe(
  transport: StreamTransport,
  path: string,
  handlers: SubscribeHandlers,
  options: StreamOptions = {},
): Subscription {
  const controller = new AbortController();
  const outer = options.signal;
  if (outer?.aborted) controller.abort(outer.reason);
  outer?.addEventListener("abort", () => controller.abort(outer.reason), { once: true });
  let lastEventId = options.lastEventId ?? "";
  const done = (async () => {
    try {
      for await (const event of streamSession(transport, path, { ...options, signal: controller.signal })) {
        lastEventId = event.id;
        handlers.onEvent(event);
      }
    } catch (error) {
      handlers.onError?.(error instanceof TetherError ? error : errorFromFetch(error));
    } finally {
      handlers.onClose?.();
    }
  })();
  return {
    close: () => controller.abort(),
    done,
    get lastEventId() {
      return lastEventId;
    },
  };
}
