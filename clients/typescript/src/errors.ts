/**
 * A failure answered by the server (its JSON error envelope) or met on the way to it.
 *
 * Every Tether error is `{"error": {"type", "message", "details"}}` over HTTP; the client
 * turns it into a `TetherError` carrying the same `type` (the server error's stable code),
 * the HTTP `status`, and the `details` object, so nothing has to be parsed out of a message.
 */

/** The `type` of an error that never reached the server, or whose answer was not an envelope. */
export type ClientErrorType = "network" | "invalid_response" | "aborted";

/**
 * A typed failure: `type` is the server's error code (`conversation_not_found`,
 * `invalid_dispatch`, ...) or one of {@link ClientErrorType}.
 *
 * @example
 * try {
 *   await client.approve("nope");
 * } catch (error) {
 *   if (error instanceof TetherError && error.type === "approval_not_found") { ... }
 * }
 */
export class TetherError extends Error {
  override readonly name = "TetherError";
  /** The server's error code, or `network`, `invalid_response`, `aborted`. */
  readonly type: string;
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** What the server said besides the message (a field, an id, ...). */
  readonly details: Record<string, unknown>;

  constructor(
    type: string,
    message: string,
    status: number,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.type = type;
    this.status = status;
    this.details = details;
  }

  /** Whether trying again later may succeed: no answer, or a 502/503. */
  get retryable(): boolean {
    return this.status === 0 ? this.type === "network" : this.status === 502 || this.status === 503;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The typed error of a failed response, read from its envelope (its body is consumed). */
export async function errorFromResponse(response: Response): Promise<TetherError> {
  const text = await response.text().catch(() => "");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const envelope = isRecord(parsed) ? parsed["error"] : undefined;
  if (isRecord(envelope) && typeof envelope["type"] === "string") {
    const details = isRecord(envelope["details"]) ? envelope["details"] : {};
    const message = typeof envelope["message"] === "string" ? envelope["message"] : envelope["type"];
    return new TetherError(envelope["type"], message, response.status, details);
  }
  return new TetherError(
    "invalid_response",
    `HTTP ${response.status} without an error envelope: ${text.slice(0, 200)}`,
    response.status,
  );
}

/** A fetch that threw: aborted by the caller's signal, or no answer at all. */
export function errorFromFetch(error: unknown, signal?: AbortSignal | null): TetherError {
  if (signal?.aborted || (error instanceof Error && error.name === "AbortError")) {
    return new TetherError("aborted", "the request was aborted", 0, {}, { cause: error });
  }
  const reason = error instanceof Error ? error.message : String(error);
  return new TetherError("network", `cannot reach the server: ${reason}`, 0, {}, { cause: error });
}
