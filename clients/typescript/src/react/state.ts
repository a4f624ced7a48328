/**
 * The state of `useTetherSession`, as a pure reducer: the events read so far (each once,
 * in order, even across reconnections), and where the connection stands. Free of React,
 * so it is tested (and usable) without it.
 */

import type { TetherError } from "../errors.js";
import type { StreamEvent } from "../subscribe.js";

/** Where a session's subscription stands. */
export type ConnectionStatus = "idle" | "connecting" | "open" | "reconnecting" | "closed" | "error";

/** What `useTetherSession` renders from. */
export interface SessionState {
  status: ConnectionStatus;
  /** Every event read, oldest first. */
  events: StreamEvent[];
  /** The last event's id: where a resumed subscription starts. */
  lastEventId: string;
  /** The failure that ended the subscription (status `error`), or the last retried one. */
  error: TetherError | null;
}

/** What changes the state. */
export type SessionAction =
  | { type: "connect"; lastEventId?: string }
  | { type: "open" }
  | { type: "event"; event: StreamEvent }
  | { type: "retry"; error: TetherError }
  | { type: "fail"; error: TetherError }
  | { type: "close" }
  | { type: "reset" };

/** The state before anything is read. */
export const initialSessionState: SessionState = Object.freeze({
  status: "idle",
  events: [],
  lastEventId: "",
  error: null,
}) as SessionState;

/**
 * The next state. An event whose id is the last one's is dropped, so a stray repeat (a
 * progress frame carries the id of the record before it) is never rendered twice.
 *
 * @example
 * const next = sessionReducer(initialSessionState, { type: "event", event });
 */
export function sessionReducer(state: SessionState, action: SessionAction): SessionState {
  switch (action.type) {
    case "connect":
      return { ...state, status: "connecting", error: null, lastEventId: action.lastEventId ?? state.lastEventId };
    case "open":
      return { ...state, status: "open" };
    case "event": {
      const { event } = action;
      // Events without an id of their own (progress) repeat the last id: keep them.
      if (event.event !== "progress" && event.id !== "" && event.id === state.lastEventId) return state;
      return { ...state, status: "open", events: [...state.events, event], lastEventId: event.id || state.lastEventId };
    }
    case "retry":
      return { ...state, status: "reconnecting", error: action.error };
    case "fail":
      return { ...state, status: "error", error: action.error };
    case "close":
      return state.status === "error" ? state : { ...state, status: "closed" };
    case "reset":
      return initialSessionState;
  }
}
