// Reads Tether's protocol streams with the protocols' own clients, and prints what they made
// of them as JSON: tests/http/test_chat_clients.py runs it against a real server.
//
//   node check.mjs ag-ui-post <url> <threadId> <runId> <text>   AG-UI's HttpAgent.runAgent
//   node check.mjs ag-ui-get <url>                                 a GET ?view=ag-ui, verified
//   node check.mjs ai-sdk-post <url> <chatId> <messageId> <text>  useChat's DefaultChatTransport
//   node check.mjs ai-sdk-get <url>                                a GET ?view=ai-sdk
//   node check.mjs ai-sdk-reconnect <api> <chatId>                useChat's resume (reconnectToStream)
//   node check.mjs ag-ui-resume <url> <threadId> <text>   a run that parks, then a resume
//   node check.mjs ai-sdk-approve <url> <chatId> <text>   a reply that asks, then the approval
// Any event a client rejects fails the run (exit 1, the error on stderr).
import { HttpAgent, runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";
import {
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from "ai";
import { lastValueFrom, toArray } from "rxjs";

const [mode, url, ...rest] = process.argv.slice(2);

async function agUiPost([threadId, runId, text]) {
  const agent = new HttpAgent({
    url,
    threadId,
    initialMessages: [{ id: `${runId}-user`, role: "user", content: text }],
  });
  const events = [];
  const outcome = await agent.runAgent({ runId }, { onEvent: ({ event }) => events.push(event) });
  return { events, newMessages: outcome.newMessages, messages: agent.messages };
}

async function agUiGet() {
  const http$ = runHttpRequest(() => fetch(url, { headers: { Accept: "text/event-stream" } }));
  const events = await lastValueFrom(transformHttpEventStream(http$).pipe(verifyEvents(false), toArray()));
  return { events };
}

async function agUiResume([threadId, text]) {
  const agent = new HttpAgent({
    url,
    threadId,
    initialMessages: [{ id: "u-1", role: "user", content: text }],
  });
  const first = [];
  await agent.runAgent({ runId: "run-1" }, { onEvent: ({ event }) => first.push(event) });
  const interrupts = first.at(-1).outcome.interrupts;
  const then = [];
  const resume = interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: true }));
  await agent.runAgent({ runId: "run-2", resume }, { onEvent: ({ event }) => then.push(event) });
  return { first, then, messages: agent.messages };
}

async function aiSdkApprove([chatId, text]) {
  const transport = new DefaultChatTransport({ api: url });
  const user = { id: "u-1", role: "user", parts: [{ type: "text", text }] };
  const send = async (messages, message) => {
    const stream = await transport.sendMessages({
      chatId,
      messages,
      trigger: "submit-message",
      messageId: undefined,
      abortSignal: undefined,
    });
    const chunks = await collect(stream);
    return { chunks, message: await readMessage(chunks, message) };
  };
  const asked = await send([user]);
  // What addToolApprovalResponse does to the part, then the request useChat sends.
  const answered = structuredClone(asked.message);
  for (const part of answered.parts) {
    if (part.state === "approval-requested") {
      part.state = "approval-responded";
      part.approval = { ...part.approval, approved: true };
    }
  }
  const then = await send([user, answered], answered);
  return { asked, then };
}

async function aiSdkReconnect([chatId]) {
  const transport = new DefaultChatTransport({ api: url });
  const stream = await transport.reconnectToStream({ chatId });
  if (stream === null) return { stream: null };
  const chunks = await collect(stream);
  return { chunks, message: await readMessage(chunks) };
}

async function readMessage(chunks, start) {
  const stream = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  let message;
  for await (const state of readUIMessageStream({
    message: start,
    stream,
    onError: (error) => {
      throw error;
    },
    terminateOnError: true,
  })) {
    message = state;
  }
  return message;
}

async function collect(stream) {
  const chunks = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return chunks;
    chunks.push(value);
  }
}

async function aiSdkPost([chatId, messageId, text]) {
  const transport = new DefaultChatTransport({ api: url });
  const stream = await transport.sendMessages({
    chatId,
    messages: [{ id: messageId, role: "user", parts: [{ type: "text", text }] }],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  const chunks = await collect(stream);
  return { chunks, message: await readMessage(chunks) };
}

async function aiSdkGet() {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const header = response.headers.get("x-vercel-ai-ui-message-stream");
  const results = await collect(
    parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema }),
  );
  const chunks = [];
  for (const result of results) {
    if (!result.success) throw new Error(`not a UI message chunk: ${result.error}`);
    chunks.push(result.value);
  }
  // Each submission is a message of its own: read each from its start.
  const messages = [];
  let current = [];
  for (const chunk of chunks) {
    if (chunk.type === "start" && current.length) {
      messages.push(await readMessage(current));
      current = [];
    }
    current.push(chunk);
  }
  if (current.length) messages.push(await readMessage(current));
  return { header, chunks, messages };
}

const modes = {
  "ag-ui-post": agUiPost,
  "ag-ui-get": agUiGet,
  "ai-sdk-post": aiSdkPost,
  "ai-sdk-get": aiSdkGet,
  "ag-ui-resume": agUiResume,
  "ai-sdk-approve": aiSdkApprove,
  "ai-sdk-reconnect": aiSdkReconnect,
};
try {
  process.stdout.write(JSON.stringify(await modes[mode](rest)));
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
