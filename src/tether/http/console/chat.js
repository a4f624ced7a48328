// The chat panel: a session's transcript, live from its canonical stream, and the composer
// (Send; Steer, Follow-up and Abort act on the run in flight).

import { agentPath, ApiError, get, post } from "./api.js";
import { atBottom, fill, h } from "./dom.js";
import { LiveStream, readRange } from "./events.js";
import { Transcript } from "./transcript.js";

/** Records shown when a session opens (`?window=` in the URL for another number): a long
 * log opens at its end, the rest on demand. */
export const WINDOW = 400;
const POLL_MS = 1000;

export class ChatPanel {
  constructor(root, { onStatus, onOpenApprovals, onActivity }) {
    this.root = root;
    this.onStatus = onStatus;
    this.onOpenApprovals = onOpenApprovals;
    this.onActivity = onActivity;
    this.log = root.querySelector("#transcript");
    this.form = root.querySelector("#composer");
    this.message = root.querySelector("#message");
    this.schema = root.querySelector("#result-schema");
    this.problem = root.querySelector("#composer-error");
    this.title = root.querySelector("#chat-title");
    this.state = root.querySelector("#chat-state");
    this.key = null;
    this.stream = null;
    this.tracked = new Set();
    this.sessionStatus = "idle";
    this.window = WINDOW;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send("dispatch");
    });
    this.message.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send("dispatch");
      }
    });
    root.querySelector("#steer").addEventListener("click", () => this.send("steer"));
    root.querySelector("#followup").addEventListener("click", () => this.send("followup"));
    root.querySelector("#abort").addEventListener("click", () => this.abort());
    // The transcript follows new content while its reader is at the end of it.
    this.following = true;
    this.scrolling = false;
    this.log.addEventListener("scroll", () => (this.following = atBottom(this.log)));
    setInterval(() => this.poll(), POLL_MS);
  }

  /** Stop reading the session's stream (e.g. on sign-out). */
  close() {
    if (this.stream) this.stream.close();
    this.stream = null;
  }

  /** Show a session: its last `window` records, then live. */
  async show(key) {
    this.close();
    this.key = key;
    this.following = true;
    this.emptyNote = null;
    this.tracked.clear();
    this.title.textContent = `${key.agent} / ${key.instance} / ${key.session}`;
    this.problem.textContent = "";
    fill(this.log);
    const earlier = h("div", { class: "earlier" });
    const body = h("div", { class: "live" });
    this.log.append(earlier, body);
    this.transcript = this.newTranscript(body);
    let head = 0;
    try {
      head = (await get(agentPath(key, "/conversation"), { session: key.session })).head;
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      this.emptyNote = body.appendChild(h("p", { class: "empty" }, "No messages yet: say something."));
    }
    if (this.key !== key) return; // switched meanwhile
    const from = Math.max(0, head - this.window);
    if (from > 0) this.offerEarlier(earlier, from);
    this.stream = new LiveStream(key, from, {
      onEvent: (type, event) => this.live(type, event),
      onProgress: (event) => this.transcript.progress(event),
      onState: (state) => this.onStatus(state),
    });
    this.stream.open();
    this.setStatus(this.sessionStatus);
  }

  /** Opening the session failed (a 403: the identity may not read it): the transcript
   *  says why rather than staying blank. */
  failed(error) {
    fill(this.log, h("p", { class: "error", role: "alert" }, error.message));
  }

  newTranscript(root) {
    return new Transcript(root, { onOpenApprovals: this.onOpenApprovals });
  }

  live(type, event) {
    if (this.emptyNote) {
      this.emptyNote.remove();
      this.emptyNote = null;
    }
    this.transcript.apply(type, event);
    if (this.following && !this.scrolling) {
      this.scrolling = true; // once a frame, however many events came: no layout per event
      requestAnimationFrame(() => {
        this.scrolling = false;
        this.log.scrollTop = this.log.scrollHeight;
      });
    }
    this.onActivity();
  }

  /** A button that reads the previous window's events into place. */
  offerEarlier(container, until) {
    const button = h("button", { type: "button", class: "link" }, "Show earlier messages");
    button.addEventListener("click", async () => {
      button.disabled = true;
      const from = Math.max(0, until - this.window);
      const part = h("div", { class: "part" });
      const transcript = this.newTranscript(part);
      try {
        await readRange(this.key, from, until, (type, event) => transcript.apply(type, event));
      } catch (error) {
        button.disabled = false;
        this.problem.textContent = `Could not read earlier messages: ${error.message}`;
        return;
      }
      const next = h("div", { class: "earlier" });
      container.replaceChildren(next, part);
      if (from > 0) this.offerEarlier(next, from);
    });
    container.replaceChildren(button);
  }

  async send(mode) {
    const body = this.message.value.trim();
    if (!body || !this.key) return;
    this.problem.textContent = "";
    const key = this.key;
    try {
      if (mode === "dispatch") {
        const payload = { body, session: key.session };
        const schema = this.schema.value.trim();
        if (schema) payload.resultSchema = JSON.parse(schema);
        const accepted = await post(agentPath(key), payload);
        this.tracked.add(accepted.submissionId);
      } else {
        const receipt = await post(agentPath(key, `/${mode}`), { body, session: key.session });
        this.tracked.add(receipt.submissionId);
      }
      this.message.value = "";
      this.setStatus("running");
    } catch (error) {
      this.problem.textContent = error instanceof SyntaxError ? `Result schema: ${error.message}` : error.message;
    }
  }

  async abort() {
    if (!this.key) return;
    try {
      await post(agentPath(this.key, "/abort"), { session: this.key.session });
    } catch (error) {
      this.problem.textContent = error.message;
    }
  }

  /** Where the tracked submissions stand (how one ended, the transcript says: its stream
   *  carries the settlement, the same live and after a reload). */
  async poll() {
    if (!this.tracked.size) return;
    const key = this.key;
    for (const id of [...this.tracked]) {
      let submission;
      try {
        submission = await get(`/submissions/${encodeURIComponent(id)}`);
      } catch {
        return; // the server is away: the next poll asks again
      }
      if (this.key !== key || submission.status !== "settled") continue;
      this.tracked.delete(id);
    }
    if (!this.tracked.size && this.key === key) this.setStatus("idle");
  }

  /** What the sessions list says of this session: enables the controls that apply. */
  setStatus(status) {
    const running = this.tracked.size > 0 || status === "running";
    const shown = running ? "running" : status;
    this.sessionStatus = status;
    this.state.textContent = shown;
    this.state.className = `pill ${shown}`;
    this.root.querySelector("#steer").disabled = !running;
    this.root.querySelector("#followup").disabled = !running;
    this.root.querySelector("#abort").disabled = !(running || status === "waiting");
  }
}
