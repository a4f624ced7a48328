/**
 * `@tether/client`: a typed client for a Tether server, with a reconnecting `subscribe()`.
 * The React hook is the separate entry point `@tether/client/react`.
 */

export { TetherClient, isSettled } from "./client.js";
export type { CallOptions, ClientOptions, SendOptions, SessionOptions } from "./client.js";
export { TetherError, errorFromFetch, errorFromResponse } from "./errors.js";
export type { ClientErrorType } from "./errors.js";
export { SseParser, readSse } from "./sse.js";
export type { SseEvent, SseItem } from "./sse.js";
export { streamSession, subscribe } from "./subscribe.js";
export type {
  Backoff,
  StreamEvent,
  StreamOptions,
  StreamTransport,
  SubscribeHandlers,
  Subscription,
} from "./subscribe.js";
export type * from "./types.js";
export type { components, operations, paths } from "./schema.js";
