/**
 * `@tether/client/react`: `useTetherSession`, a session's events kept in React state,
 * reconnecting after a cut. React is an optional peer dependency, imported only here.
 */

import { useCallback, useEffect, useReducer, useRef } from "react";

import type { TetherClient } from "../client.js";
import type { DispatchAccepted, DispatchBody } from "../types.js";
import type { Backoff } from "../subscribe.js";
import { initialSessionState, sessionReducer, type SessionState } from "./state.js";

export { initialSessionState, sessionReducer } from "./state.js";
export type { ConnectionStatus, SessionAction, SessionState } from "./state.js";

/** Options of {@link useTetherSession}. */
export interface UseTetherSessionOptions {
  session?: string;
  view?: "records" | "stream";
  children?: boolean;
  backoff?: Backoff;
  /** Subscribe only while true (default true): e.g. until the user has signed in. */
  enabled?: boolean;
}

/** What {@link useTetherSession} answers: the state, and the session's actions. */
export interface TetherSession extends SessionState {
  /** Send a message to the session (admitted, not awaited: its events arrive by the stream). */
  send: (body: string | DispatchBody) => Promise<DispatchAccepted>;
  /** Abort the session's unsettled submissions. */
  abort: () => Promise<void>;
}

/**
 * A session's events as React state, following it until the component unmounts.
 *
 * @example
 * function Chat({ client }: { client: TetherClient }) {
 *   const { events, status, send } = useTetherSession(client, "assistant", "me");
 *   return <button onClick={() => send("hello")}>{status}: {events.length}</button>;
 * }
 */
export function useTetherSession(
  client: TetherClient,
  agent: string,
  instance: string,
  options: UseTetherSessionOptions = {},
): TetherSession {
  const { session, view, children, enabled = true } = options;
  const [state, dispatch] = useReducer(sessionReducer, initialSessionState);
  // The backoff is read when a subscription starts; a new object each render restarts nothing.
  const backoff = useRef(options.backoff);
  backoff.current = options.backoff;

  useEffect(() => {
    dispatch({ type: "reset" });
    if (!enabled) return undefined;
    dispatch({ type: "connect" });
    const subscription = client.subscribe(
      agent,
      instance,
      {
        onEvent: (event) => dispatch({ type: "event", event }),
        onError: (error) => dispatch({ type: "fail", error }),
        onClose: () => dispatch({ type: "close" }),
      },
      {
        session,
        view,
        children,
        follow: true,
        backoff: backoff.current,
        onOpen: () => dispatch({ type: "open" }),
        onRetry: (error) => dispatch({ type: "retry", error }),
      },
    );
    return () => subscription.close();
  }, [client, agent, instance, session, view, children, enabled]);

  const send = useCallback(
    (body: string | DispatchBody) => {
      const payload: DispatchBody = typeof body === "string" ? { body } : body;
      return client.dispatch(agent, instance, { ...payload, session: payload.session ?? session });
    },
    [client, agent, instance, session],
  );
  const abort = useCallback(async () => {
    await client.abort(agent, instance, { session });
  }, [client, agent, instance, session]);

  return { ...state, send, abort };
}
