/**
 * `TetherClient`: every operation of a Tether server's HTTP API a client application uses,
 * typed with the server's OpenAPI document, failing with `TetherError`. Nothing but the
 * platform's `fetch` (Node 20+, browsers, Deno, Bun, workers).
 */

import { TetherError, errorFromFetch, errorFromResponse } from "./errors.js";
import {
  subscribe,
  streamSession,
  type StreamEvent,
  type StreamOptions,
  type StreamTransport,
  type SubscribeHandlers,
  type Subscription,
} from "./subscribe.js";
import type {
  Aborted,
  AgentsPage,
  Alive,
  AnswerReceipt,
  ApprovalsPage,
  BodyOf,
  BudgetDecisionBody,
  BudgetGatesPage,
  BudgetReceipt,
  ConversationView,
  DecisionBody,
  DecisionReceipt,
  DispatchAccepted,
  DispatchBody,
  DispatchSettled,
  ErasedView,
  ExportLine,
  Forked,
  IdentityView,
  InputsPage,
  MessagesPage,
  MetadataPatch,
  MetadataView,
  OpenSubmissions,
  QueryOf,
  Ready,
  RecordsPage,
  ScheduleBody,
  ScheduleDeleted,
  ScheduleItem,
  SchedulesPage,
  SessionUsage,
  SessionsPage,
  SpansPage,
  SubmissionReceipt,
  SubmissionTreeNode,
  SubmissionView,
  UpgradeBody,
  UpgradeResult,
  UsageAnswer,
  Verified,
  VersionsPage,
  WebhookDeliveriesPage,
  WebhookDeliveryItem,
} from "./types.js";

/** How to reach a server. */
export interface ClientOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8484`. */
  baseUrl: string;
  /** A bearer token (`tether serve --auth-token`, or an identity's token). */
  token?: string;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Where a session is: its agent, instance and (default `default`) session. */
export interface SessionOptions extends CallOptions {
  session?: string;
}

/** Options of {@link TetherClient.send} and {@link TetherClient.dispatch}. */
export interface SendOptions extends CallOptions {
  /** Seconds `wait` may hold the request open (the server's default otherwise). */
  timeout?: number;
  /** What a message does to a session already running one (default `enqueue`). */
  multitask?: "enqueue" | "reject" | "interrupt" | "steer";
  /** Admits the message once however often it is sent. */
  idempotencyKey?: string;
}

type Query = Record<string, string | number | boolean | null | undefined>;

interface RequestOptions extends CallOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Whether a send's answer is its settlement (it may be an admission: not settled in time). */
export function isSettled(answer: DispatchSettled | DispatchAccepted): answer is DispatchSettled {
  return !("streamUrl" in answer);
}

function segment(value: string): string {
  return encodeURIComponent(value);
}

function sessionPath(agent: string, instance: string): string {
  return `/agents/${segment(agent)}/${segment(instance)}`;
}

/**
 * A Tether server's client.
 *
 * @example
 * const client = new TetherClient({ baseUrl: "http://127.0.0.1:8484" });
 * const answer = await client.send("assistant", "me", "what time is it?");
 * for await (const event of client.stream("assistant", "me", { follow: false })) {
 *   console.log(event.event, event.data);
 * }
 */
export class TetherClient implements StreamTransport {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.headers = options.headers ?? {};
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  private url(path: string, query?: Query): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) params.set(name, String(value));
    }
    const search = params.size > 0 ? `?${params}` : "";
    return `${this.baseUrl}${path}${search}`;
  }

  private headersWith(extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { ...this.headers, ...extra };
    if (this.token !== undefined) headers["Authorization"] = `Bearer ${this.token}`;
    return headers;
  }

  /** Send a request and answer its response, whatever its status (the stream's transport). */
  async fetchStream(path: string, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
    return this.fetchImpl(`${this.baseUrl}${path}`, { headers: this.headersWith(headers), signal });
  }

  private async send_(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const headers = this.headersWith({ Accept: "application/json", ...options.headers });
    const init: RequestInit = { method, headers, signal: options.signal ?? null };
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body);
    } else if (method === "POST") {
      // The server refuses a POST that does not say JSON (415), even without a body.
      headers["Content-Type"] = "application/json";
    }
    let response: Response;
    try {
      response = await this.fetchImpl(this.url(path, options.query), init);
    } catch (error) {
      throw errorFromFetch(error, options.signal);
    }
    if (!response.ok) throw await errorFromResponse(response);
    return response;
  }

  /**
   * Any route, answered as JSON: for what the typed methods do not cover.
   *
   * @example
   * const ready = await client.request<{ ready: boolean }>("GET", "/readyz");
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.send_(method, path, options);
    try {
      return (await response.json()) as T;
    } catch (error) {
      throw new TetherError("invalid_response", "the answer is not JSON", response.status, {}, { cause: error });
    }
  }

  // Sending

  /**
   * Send a message and, by default, wait for its settlement (`wait: false` answers at
   * admission). Not settled within `timeout`: the admission (see {@link isSettled}).
   *
   * @example
   * const answer = await client.send("assistant", "me", "hello");
   * if (isSettled(answer)) console.log(answer.status, answer.result);
   */
  async send(
    agent: string,
    instance: string,
    body: string | DispatchBody,
    options: SendOptions & { wait?: boolean } = {},
  ): Promise<DispatchSettled | DispatchAccepted> {
    const payload: DispatchBody = typeof body === "string" ? { body } : body;
    const headers: Record<string, string> = {};
    if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
    const query: QueryOf<"/agents/{agent}/{instance}", "post"> = {
      wait: options.wait ?? true,
      timeout: options.timeout,
      multitask: options.multitask,
    };
    return this.request("POST", sessionPath(agent, instance), {
      query,
      body: payload,
      headers,
      signal: options.signal,
    });
  }

  /**
   * Admit a message without waiting: its submission id, conversation and session.
   *
   * @example
   * const { submissionId } = await client.dispatch("assistant", "me", { body: "hi", session: "s1" });
   */
  async dispatch(
    agent: string,
    instance: string,
    body: string | DispatchBody,
    options: SendOptions = {},
  ): Promise<DispatchAccepted> {
    return (await this.send(agent, instance, body, { ...options, wait: false })) as DispatchAccepted;
  }

  /** Steer the running submission with a message (409 `nothing_running` if none runs). */
  async steer(agent: string, instance: string, body: string, options: SessionOptions = {}): Promise<SubmissionReceipt> {
    return this.request("POST", `${sessionPath(agent, instance)}/steer`, {
      body: { body, session: options.session } satisfies BodyOf<"/agents/{agent}/{instance}/steer", "post">,
      signal: options.signal,
    });
  }

  /** Queue a message to run after the running submission. */
  async followup(agent: string, instance: string, body: string, options: SessionOptions = {}): Promise<SubmissionReceipt> {
    return this.request("POST", `${sessionPath(agent, instance)}/followup`, {
      body: { body, session: options.session },
      signal: options.signal,
    });
  }

  /** Abort every unsettled submission of the session. */
  async abort(agent: string, instance: string, options: SessionOptions = {}): Promise<Aborted> {
    return this.request("POST", `${sessionPath(agent, instance)}/abort`, {
      body: { session: options.session },
      signal: options.signal,
    });
  }

  /** A submission; with `wait`, once settled (or the server's wait timeout). */
  async submission(submissionId: string, options: CallOptions & { wait?: boolean; timeout?: number } = {}): Promise<SubmissionView> {
    return this.request("GET", `/submissions/${segment(submissionId)}`, {
      query: { wait: options.wait, timeout: options.timeout },
      signal: options.signal,
    });
  }

  /** Abort one submission. */
  async abortSubmission(submissionId: string, options: CallOptions = {}): Promise<SubmissionView> {
    return this.request("POST", `/submissions/${segment(submissionId)}/abort`, { signal: options.signal });
  }

  // Sessions

  /**
   * A page of sessions, newest activity first (`nextCursor` for the next); `q` searches the
   * words of their messages, `metadata` their metadata (a value's text form per key),
   * `since` their last activity.
   *
   * @example
   * const found = await client.sessions({ q: "refund", metadata: { customer: "acme" } });
   */
  async sessions(
    query: QueryOf<"/sessions", "get"> & { metadata?: Record<string, string> } = {},
    options: CallOptions = {},
  ): Promise<SessionsPage> {
    const { metadata, ...rest } = query;
    const filters: Query = {};
    for (const [key, value] of Object.entries(metadata ?? {})) filters[`metadata.${key}`] = value;
    return this.request("GET", "/sessions", { query: { ...rest, ...filters }, signal: options.signal });
  }

  /**
   * Merge `patch` into the session's metadata (RFC 7396: `null` removes a key) and answer
   * what it leaves.
   *
   * @example
   * await client.patchMetadata("assistant", "me", { customer: "acme", draft: null });
   */
  async patchMetadata(
    agent: string,
    instance: string,
    patch: MetadataPatch,
    options: SessionOptions = {},
  ): Promise<MetadataView> {
    return this.request("PATCH", `${sessionPath(agent, instance)}/metadata`, {
      query: { session: options.session },
      body: patch,
      signal: options.signal,
    });
  }

  /** One session: its conversation, head, and where it stands. */
  async session(agent: string, instance: string, options: SessionOptions = {}): Promise<ConversationView> {
    return this.request("GET", `${sessionPath(agent, instance)}/conversation`, {
      query: { session: options.session },
      signal: options.signal,
    });
  }

  /** A page of the session's records after `after`. */
  async records(
    agent: string,
    instance: string,
    query: QueryOf<"/agents/{agent}/{instance}/records", "get"> = {},
    options: CallOptions = {},
  ): Promise<RecordsPage> {
    return this.request("GET", `${sessionPath(agent, instance)}/records`, { query, signal: options.signal });
  }

  /** The session's messages, as a model would be given them. */
  async messages(agent: string, instance: string, options: SessionOptions = {}): Promise<MessagesPage> {
    return this.request("GET", `${sessionPath(agent, instance)}/messages`, {
      query: { session: options.session },
      signal: options.signal,
    });
  }

  /** Erase the session for good (409 `session_busy` while something of it is unsettled). */
  async erase(agent: string, instance: string, options: SessionOptions & { force?: boolean } = {}): Promise<ErasedView> {
    return this.request("DELETE", sessionPath(agent, instance), {
      query: { session: options.session, force: options.force },
      signal: options.signal,
    });
  }

  /** The agents the server runs. */
  async agents(options: CallOptions = {}): Promise<AgentsPage> {
    return this.request("GET", "/agents", { signal: options.signal });
  }

  // Streams

  /**
   * The session's events as an async iterable that reconnects with `Last-Event-ID` after a
   * cut; it follows the session (`follow: true`) unless told otherwise, and ends when
   * `options.signal` aborts.
   *
   * @example
   * const controller = new AbortController();
   * for await (const event of client.stream("assistant", "me", { signal: controller.signal })) {
   *   if (event.event === "submission_settled") controller.abort();
   * }
   */
  stream(agent: string, instance: string, options: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    return streamSession(this, sessionPath(agent, instance), options);
  }

  /**
   * Call `handlers.onEvent` for each of the session's events, reconnecting after a cut,
   * until `close()`.
   *
   * @example
   * const sub = client.subscribe("assistant", "me", { onEvent: (e) => render(e) });
   * // later
   * sub.close();
   */
  subscribe(agent: string, instance: string, handlers: SubscribeHandlers, options: StreamOptions = {}): Subscription {
    return subscribe(this, sessionPath(agent, instance), handlers, options);
  }

  // Approvals

  /** A page of approval gates (pending by default), oldest request first. */
  async approvals(query: QueryOf<"/approvals", "get"> = {}, options: CallOptions = {}): Promise<ApprovalsPage> {
    return this.request("GET", "/approvals", { query, signal: options.signal });
  }

  /** Decide a parked tool call: approve, reject, or edit its arguments. */
  async decide(approvalId: string, decision: DecisionBody, options: CallOptions = {}): Promise<DecisionReceipt> {
    return this.request("POST", `/approvals/${segment(approvalId)}`, { body: decision, signal: options.signal });
  }

  /**
   * Approve a parked tool call; with `args`, as edited.
   *
   * @example
   * const [gate] = (await client.approvals()).approvals;
   * if (gate) await client.approve(gate.approvalId, { reason: "looks fine" });
   */
  async approve(
    approvalId: string,
    options: CallOptions & { args?: Record<string, unknown>; reason?: string; approver?: string } = {},
  ): Promise<DecisionReceipt> {
    const { signal, args, ...rest } = options;
    const decision = (args === undefined ? { decision: "approve", ...rest } : { decision: "edit", args, ...rest }) as DecisionBody;
    return this.decide(approvalId, decision, { signal });
  }

  /** Reject a parked tool call. */
  async reject(approvalId: string, options: CallOptions & { reason?: string; approver?: string } = {}): Promise<DecisionReceipt> {
    const { signal, ...rest } = options;
    return this.decide(approvalId, { decision: "reject", ...rest }, { signal });
  }

  // Inputs

  /** A page of the inputs runs asked for (pending by default). */
  async inputs(query: QueryOf<"/inputs", "get"> = {}, options: CallOptions = {}): Promise<InputsPage> {
    return this.request("GET", "/inputs", { query, signal: options.signal });
  }

  /** Answer a run's question with a JSON value (checked against the input's schema). */
  async answer(inputId: string, value: unknown, options: CallOptions & { responder?: string } = {}): Promise<AnswerReceipt> {
    return this.request("POST", `/inputs/${segment(inputId)}`, {
      body: { value, responder: options.responder } as BodyOf<"/inputs/{input_id}", "post">,
      signal: options.signal,
    });
  }

  // Conversations

  /** A new session starting with this one's first `atSeq` records. */
  async fork(conversationId: string, atSeq: number, options: CallOptions & { session?: string } = {}): Promise<Forked> {
    return this.request("POST", `/conversations/${segment(conversationId)}/fork`, {
      body: { atSeq, session: options.session } satisfies BodyOf<"/conversations/{conversation_id}/fork", "post">,
      signal: options.signal,
    });
  }

  /**
   * The whole log as the store holds it, one object a record, then the export's trailer.
   *
   * @example
   * const lines = await client.export(conversationId);
   */
  async export(conversationId: string, options: CallOptions = {}): Promise<ExportLine[]> {
    const text = await this.exportText(conversationId, options);
    return text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as ExportLine);
  }

  /** The export as its NDJSON text, byte for byte (what `tether verify` checks). */
  async exportText(conversationId: string, options: CallOptions = {}): Promise<string> {
    const response = await this.send_("GET", `/conversations/${segment(conversationId)}/export`, {
      headers: { Accept: "application/x-ndjson" },
      signal: options.signal,
    });
    return response.text();
  }

  /** Re-derive the conversation's hash chain (409 `log_tampered` if altered). */
  async verify(conversationId: string, options: CallOptions = {}): Promise<Verified> {
    return this.request("GET", `/conversations/${segment(conversationId)}/verify`, { signal: options.signal });
  }

  // Usage

  /** A tenant's spending over a day or month, or (`session`: a conversation id) a session's. */
  async usage(query: QueryOf<"/usage", "get"> = {}, options: CallOptions = {}): Promise<UsageAnswer> {
    return this.request("GET", "/usage", { query, signal: options.signal });
  }

  /** One conversation's model calls, tokens and cost. */
  async sessionUsage(conversationId: string, options: CallOptions = {}): Promise<SessionUsage> {
    return this.request("GET", `/conversations/${segment(conversationId)}/usage`, { signal: options.signal });
  }

  /** Summarise the session's history into a shorter one (a submission of its own). */
  async compact(agent: string, instance: string, options: SessionOptions = {}): Promise<SubmissionReceipt> {
    return this.request("POST", `${sessionPath(agent, instance)}/compact`, {
      body: { session: options.session ?? "default" },
      signal: options.signal,
    });
  }

  /** The session's unsettled submissions, in order. */
  async openSubmissions(
    agent: string,
    instance: string,
    options: SessionOptions & { limit?: number } = {},
  ): Promise<OpenSubmissions> {
    return this.request("GET", `${sessionPath(agent, instance)}/submissions`, {
      query: { session: options.session, limit: options.limit },
      signal: options.signal,
    });
  }

  /** A submission and its subagents' submissions, as a tree. */
  async submissionTree(submissionId: string, options: CallOptions = {}): Promise<SubmissionTreeNode> {
    return this.request("GET", `/submissions/${segment(submissionId)}/tree`, { signal: options.signal });
  }

  /** The conversation's trace spans, after `after`. */
  async spans(
    conversationId: string,
    query: QueryOf<"/conversations/{conversation_id}/spans", "get"> = {},
    options: CallOptions = {},
  ): Promise<SpansPage> {
    return this.request("GET", `/conversations/${segment(conversationId)}/spans`, { query, signal: options.signal });
  }

  // Budgets, schedules, versions

  /** Runs parked on a spent budget (`status`: pending, decided, closed or all). */
  async budgets(query: QueryOf<"/budgets", "get"> = {}, options: CallOptions = {}): Promise<BudgetGatesPage> {
    return this.request("GET", "/budgets", { query, signal: options.signal });
  }

  /** Extend a spent budget and resume its run, or settle it. */
  async decideBudget(gateId: string, decision: BudgetDecisionBody, options: CallOptions = {}): Promise<BudgetReceipt> {
    return this.request("POST", `/budgets/${segment(gateId)}`, { body: decision, signal: options.signal });
  }

  /** The schedules kept. */
  async schedules(options: CallOptions = {}): Promise<SchedulesPage> {
    return this.request("GET", "/schedules", { signal: options.signal });
  }

  /** Keep a schedule (its id chosen by the caller: adding it again is harmless). */
  async addSchedule(schedule: ScheduleBody, options: CallOptions = {}): Promise<ScheduleItem> {
    return this.request("POST", "/schedules", { body: schedule, signal: options.signal });
  }

  /** Stop a schedule. */
  async deleteSchedule(scheduleId: string, options: CallOptions = {}): Promise<ScheduleDeleted> {
    return this.request("DELETE", `/schedules/${segment(scheduleId)}`, { signal: options.signal });
  }

  /** The agents' versions and the runs pinned to each. */
  async versions(query: QueryOf<"/versions", "get"> = {}, options: CallOptions = {}): Promise<VersionsPage> {
    return this.request("GET", "/versions", { query, signal: options.signal });
  }

  /** Move runs pinned to an older version onto the newest. */
  async upgradeVersions(upgrade: UpgradeBody, options: CallOptions = {}): Promise<UpgradeResult> {
    return this.request("POST", "/versions/upgrade", { body: upgrade, signal: options.signal });
  }

  // The server

  /** Who the caller is, and what it may do. */
  async me(options: CallOptions = {}): Promise<IdentityView> {
    return this.request("GET", "/me", { signal: options.signal });
  }

  /** Liveness (`/healthz`). */
  async alive(options: CallOptions = {}): Promise<Alive> {
    return this.request("GET", "/healthz", { signal: options.signal });
  }

  /** Readiness, each dependency's state (`/readyz`; 503 when a required one is down). */
  async ready(options: CallOptions = {}): Promise<Ready> {
    return this.request("GET", "/readyz", { signal: options.signal });
  }

  /** The Prometheus metrics, as text. */
  async metrics(options: CallOptions = {}): Promise<string> {
    const response = await this.send_("GET", "/metrics", { signal: options.signal });
    return response.text();
  }

  // Outbound webhooks

  /**
   * The outbox's deliveries, oldest first (`after`: the `nextCursor` of the page before).
   *
   * @example
   * const failed = await client.webhookDeliveries({ status: "failed" });
   */
  async webhookDeliveries(
    query: QueryOf<"/webhook-deliveries", "get"> = {},
    options: CallOptions = {},
  ): Promise<WebhookDeliveriesPage> {
    return this.request("GET", "/webhook-deliveries", { query, signal: options.signal });
  }

  /** One delivery, with the JSON it sends. */
  async webhookDelivery(deliveryId: string, options: CallOptions = {}): Promise<WebhookDeliveryItem> {
    return this.request("GET", `/webhook-deliveries/${segment(deliveryId)}`, { signal: options.signal });
  }

  /** Send a delivery again (its id unchanged, so the receiver can tell a repeat). */
  async resendWebhook(deliveryId: string, options: CallOptions = {}): Promise<WebhookDeliveryItem> {
    return this.request("POST", `/webhook-deliveries/${segment(deliveryId)}/resend`, { signal: options.signal });
  }
}
