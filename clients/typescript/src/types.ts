/**
 * Names for the generated OpenAPI types (`schema.ts`, from `openapi.json`): a route's query,
 * body and answer, and the components the client's operations return. Written against the
 * generated `paths`, so a route the server changes fails the client's type-check.
 */

import type { components, paths } from "./schema.js";

/** Every component schema of the server's OpenAPI document, by name. */
export type Schemas = components["schemas"];

type Operation<P extends keyof paths, M extends keyof paths[P]> = paths[P][M];

/** A route's query parameters. */
export type QueryOf<P extends keyof paths, M extends keyof paths[P]> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** A route's JSON request body. */
export type BodyOf<P extends keyof paths, M extends keyof paths[P]> =
  Operation<P, M> extends { requestBody: { content: { "application/json": infer B } } }
    ? B
    : Operation<P, M> extends { requestBody?: { content: { "application/json": infer B } } }
      ? B
      : never;

/** A route's JSON answer for a status. */
export type AnswerOf<P extends keyof paths, M extends keyof paths[P], S extends number> =
  Operation<P, M> extends { responses: { [K in S]: { content: { "application/json": infer A } } } }
    ? A
    : never;

export type DispatchBody = Schemas["DispatchBody"];
export type DispatchAccepted = Schemas["DispatchAccepted"];
export type DispatchSettled = Schemas["DispatchSettled"];
export type SessionsPage = Schemas["SessionsPage"];
export type SessionItem = Schemas["SessionItem"];
export type MetadataView = Schemas["MetadataView"];
/** A merge patch of a session's metadata (RFC 7396: `null` removes a key). */
export type MetadataPatch = Record<string, string | number | boolean | null>;
export type ConversationView = Schemas["ConversationView"];
export type RecordsPage = Schemas["RecordsPage"];
export type RecordEnvelope = Schemas["RecordEnvelope"];
export type MessagesPage = Schemas["MessagesPage"];
export type SubmissionView = Schemas["SubmissionView"];
export type ApprovalsPage = Schemas["ApprovalsPage"];
export type ApprovalItem = Schemas["ApprovalItem"];
export type DecisionBody = Schemas["DecisionBody"];
export type DecisionReceipt = Schemas["DecisionReceipt"];
export type InputsPage = Schemas["InputsPage"];
export type InputItem = Schemas["InputItem"];
export type AnswerBody = Schemas["AnswerBody"];
export type AnswerReceipt = Schemas["AnswerReceipt"];
export type ForkBody = Schemas["ForkBody"];
export type Forked = Schemas["Forked"];
export type Aborted = Schemas["Aborted"];
export type SubmissionReceipt = Schemas["SubmissionReceipt"];
export type UsageAnswer = AnswerOf<"/usage", "get", 200>;
export type SessionUsage = AnswerOf<"/conversations/{conversation_id}/usage", "get", 200>;
export type Verified = Schemas["Verified"];
export type ErasedView = Schemas["ErasedView"];
export type AgentsPage = Schemas["AgentsPage"];
export type OpenSubmissions = Schemas["OpenSubmissions"];
export type SubmissionTreeNode = Schemas["SubmissionTreeNode"];
export type SpansPage = Schemas["SpansPage"];
export type BudgetGatesPage = Schemas["BudgetGatesPage"];
export type BudgetDecisionBody = Schemas["BudgetDecisionBody"];
export type BudgetReceipt = Schemas["BudgetReceipt"];
export type SchedulesPage = Schemas["SchedulesPage"];
export type ScheduleBody = Schemas["ScheduleBody"];
export type ScheduleItem = Schemas["ScheduleItem"];
export type ScheduleDeleted = Schemas["ScheduleDeleted"];
export type VersionsPage = Schemas["VersionsPage"];
export type UpgradeBody = Schemas["UpgradeBody"];
export type UpgradeResult = Schemas["UpgradeResult"];
export type IdentityView = Schemas["IdentityView"];
export type Alive = Schemas["Alive"];
export type Ready = Schemas["Ready"];
export type WebhookDeliveriesPage = Schemas["WebhookDeliveriesPage"];
export type WebhookDeliveryItem = Schemas["WebhookDeliveryItem"];
export type ErrorEnvelope = Schemas["ErrorEnvelope"];

/** One line of an export: a stored record, or the trailer that closes it. */
export type ExportLine = Record<string, unknown>;
