// codewhale web: the browser client of the runtime API. No framework, no
// build step, nothing fetched from elsewhere. The browser is admitted by
// its HttpOnly session cookie; the runtime token never reaches this page.
// The same script drives `app-server --mobile`'s phone page (/mobile,
// <html data-client="mobile">): there the user types the runtime token,
// which lives in `bearer` below only — never storage, never a cookie —
// and goes out as `Authorization: Bearer`, events too (a streaming fetch:
// EventSource cannot send headers).
"use strict";

const MOBILE = document.documentElement.dataset.client === "mobile";
let bearer = null; // the phone page's token: this variable, nowhere else

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

const state = {
  threads: [],
  current: null, // thread id
  gen: 0, // bumped on every selection: stale streams are ignored
  lastSeq: 0,
  es: null,
  seen: new Set(), // event seqs applied (drops duplicates)
  turn: null, // running turn id
  usage: { input: 0, output: 0, cost: 0, costKnown: true },
  thread: null,
  sandbox: null, // backend · level of the last command that ran
  resnapshotting: false,
  nodes: new Map(), // item id -> its transcript node (no selector scans)
  scrollQueued: false,
};

async function api(method, path, body) {
  const init = MOBILE
    ? { method, credentials: "omit", cache: "no-store", headers: { Authorization: "Bearer " + bearer } }
    : { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!res.ok) {
    const msg = json && json.error ? json.error.message : res.status + " " + res.statusText;
    throw new Error(msg);
  }
  return json;
}

function notice(text, error) {
  const n = el("div", "notice" + (error ? " error" : ""), text);
  $("transcript").appendChild(n);
  scrollDown();
}

// At most once a frame: reading scrollHeight lays the transcript out, and
// a stream of events must not force that once per event.
function scrollDown() {
  if (state.scrollQueued) return;
  state.scrollQueued = true;
  requestAnimationFrame(() => {
    state.scrollQueued = false;
    const t = $("transcript");
    t.scrollTop = t.scrollHeight;
  });
}

// ---- threads ----

async function loadThreads() {
  const q = new URLSearchParams({ limit: "200" });
  const s = $("search").value.trim();
  if (s) q.set("search", s);
  if ($("show-archived").checked) q.set("archived_only", "true");
  const r = await api("GET", "/v1/threads/summary?" + q.toString());
  state.threads = r.items;
  renderRail();
}

function renderRail() {
  const ul = $("threads");
  ul.replaceChildren();
  for (const t of state.threads) {
    const li = el("li");
    li.dataset.id = t.id;
    if (t.id === state.current) li.classList.add("selected");
    li.appendChild(el("span", "t", t.title || t.preview || t.id));
    li.appendChild(el("span", "s", (t.latest_turn_status || "new") + " · " + (t.model || "")));
    li.addEventListener("click", () => select(t.id));
    ul.appendChild(li);
  }
}

async function newThread() {
  const r = await api("POST", "/v1/threads", {});
  $("search").value = "";
  await loadThreads();
  await select(r.thread.id);
}

async function rename() {
  if (!state.current) return;
  const title = window.prompt("Thread title", (state.thread && state.thread.title) || "");
  if (title === null) return;
  await api("PATCH", "/v1/threads/" + state.current, { title });
  await loadThreads();
  $("thread-title").textContent = title;
}

async function archive() {
  if (!state.current) return;
  await api("PATCH", "/v1/threads/" + state.current, { archived: true });
  closeStream();
  state.current = null;
  $("transcript").replaceChildren();
  $("requests").replaceChildren();
  $("thread-title").textContent = "No thread selected";
  $("thread-actions").hidden = true;
  await loadThreads();
}

// ---- selection: snapshot first, then the stream from latest_seq ----

function closeStream() {
  if (state.es) {
    state.es.close();
    state.es = null;
  }
}

async function select(id) {
  closeStream();
  state.gen += 1;
  const gen = state.gen;
  state.current = id;
  document.body.classList.remove("rail-open");
  renderRail();
  const snap = await api("GET", "/v1/threads/" + id);
  if (gen !== state.gen) return; // another thread was chosen meanwhile
  hydrate(snap);
  openStream(gen);
}

function hydrate(snap) {
  state.thread = snap.thread;
  state.sandbox = null;
  state.lastSeq = snap.latest_seq;
  state.seen = new Set();
  state.turn = null;
  state.usage = { input: 0, output: 0, cost: 0, costKnown: true };
  $("thread-title").textContent = snap.thread.title || snap.thread.id;
  $("thread-actions").hidden = false;
  state.nodes = new Map();
  $("requests").replaceChildren();
  for (const turn of snap.turns) {
    if (turn.status === "in_progress" || turn.status === "queued") state.turn = turn.id;
    else countUsage(turn);
  }
  // The whole snapshot is built off-document and attached once: one
  // layout for a 2,000-item thread, not one per item.
  const frag = document.createDocumentFragment();
  for (const item of snap.items) {
    itemStarted(item, frag);
    if (item.status !== "in_progress" && item.status !== "queued") itemFinished(item, item.status);
  }
  $("transcript").replaceChildren(frag);
  // Requests whose event is at or before latest_seq: shown from the
  // snapshot, so a reload never strands them.
  for (const a of snap.pending_approvals) approvalCard(Object.assign({ approval_id: a.id }, a.payload));
  for (const u of snap.pending_user_inputs) inputCard(Object.assign({ input_id: u.id }, u.payload), u.turn_id);
  renderFooter();
  setRunning(state.turn !== null);
  scrollDown();
}

function openStream(gen) {
  const url = "/v1/threads/" + state.current + "/events?since_seq=" + state.lastSeq;
  if (MOBILE) {
    state.es = fetchStream(url, gen);
    return;
  }
  const es = new EventSource(url, { withCredentials: true });
  state.es = es;
  $("conn").textContent = "connecting…";
  es.onopen = () => { if (gen === state.gen) $("conn").textContent = "live"; };
  es.onerror = () => {
    if (gen !== state.gen) return;
    $("conn").textContent = "reconnecting…";
    // EventSource retries by itself with Last-Event-ID; a closed one is
    // reopened from the newest accepted sequence.
    if (es.readyState === EventSource.CLOSED) setTimeout(() => reopen(gen), 1000);
  };
  es.onmessage = (m) => onEnvelope(gen, m.data);
  for (const name of EVENT_NAMES) es.addEventListener(name, (m) => onEnvelope(gen, m.data));
}

// Server-sent events over a streaming fetch with the bearer token (the
// phone page). The object looks enough like an EventSource for
// closeStream/reopen; a lost stream is reopened from the newest accepted
// sequence after a second.
function fetchStream(url, gen) {
  const ctrl = new AbortController();
  const s = { readyState: EventSource.CONNECTING, close() { s.readyState = EventSource.CLOSED; ctrl.abort(); } };
  $("conn").textContent = "connecting…";
  (async () => {
    try {
      const res = await fetch(url, {
        headers: { Authorization: "Bearer " + bearer, Accept: "text/event-stream" },
        credentials: "omit", cache: "no-store", signal: ctrl.signal,
      });
      if (!res.ok || !res.body) throw new Error(String(res.status));
      s.readyState = EventSource.OPEN;
      if (gen === state.gen) $("conn").textContent = "live";
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(l.startsWith("data: ") ? 6 : 5)).join("\n");
          if (data) onEnvelope(gen, data);
        }
      }
    } catch (_) {
      // aborted on purpose, or the network went away: see below
    }
    if (s.readyState === EventSource.CLOSED) return; // closed on purpose
    s.readyState = EventSource.CLOSED;
    if (gen !== state.gen) return;
    $("conn").textContent = "reconnecting…";
    setTimeout(() => reopen(gen), 1000);
  })();
  return s;
}

function reopen(gen) {
  if (gen !== state.gen || !state.current) return;
  if (state.es && state.es.readyState !== EventSource.CLOSED) return;
  closeStream();
  openStream(gen);
}

async function resnapshot(gen) {
  if (state.resnapshotting) return;
  state.resnapshotting = true;
  try {
    closeStream();
    const snap = await api("GET", "/v1/threads/" + state.current);
    if (gen !== state.gen) return;
    hydrate(snap);
    openStream(gen);
  } finally {
    state.resnapshotting = false;
  }
}

const EVENT_NAMES = [
  "thread.updated", "turn.started", "turn.lifecycle", "turn.steered", "turn.completed",
  "item.started", "item.delta", "item.completed", "item.failed", "item.interrupted",
  "approval.required", "approval.decided", "approval.timeout", "approval.canceled",
  "user_input.required", "user_input.answered", "user_input.canceled",
  "sandbox.denied",
];

function onEnvelope(gen, data) {
  if (gen !== state.gen) return;
  let env;
  try { env = JSON.parse(data); } catch (_) { return; }
  if (env.thread_id !== state.current) return;
  if (env.seq <= state.lastSeq || state.seen.has(env.seq)) return; // a duplicate
  if (env.previous_seq !== undefined && env.previous_seq > state.lastSeq) {
    // A gap: something between was missed. Snapshot again, once.
    resnapshot(gen);
    return;
  }
  state.seen.add(env.seq);
  state.lastSeq = env.seq;
  apply(env);
}

function apply(env) {
  const p = env.payload || {};
  switch (env.event) {
    case "turn.started":
      state.turn = env.turn_id;
      setRunning(true);
      break;
    case "turn.completed":
      state.turn = null;
      setRunning(false);
      countUsage(p.turn);
      if (p.turn && p.turn.status !== "completed") {
        notice("turn " + p.turn.status + (p.turn.error ? ": " + p.turn.error : ""), p.turn.status === "failed");
      }
      loadThreads();
      break;
    case "item.started":
      itemStarted(p.item);
      break;
    case "item.delta": {
      const node = state.nodes.get(env.item_id);
      if (node && p.kind === "agent_message") node.textContent += p.delta;
      break;
    }
    case "item.completed": case "item.failed": case "item.interrupted":
      itemFinished(p.item, env.event.slice(5));
      break;
    case "approval.required":
      approvalCard(p);
      break;
    case "approval.decided": case "approval.timeout": case "approval.canceled":
      removeCard("appr", p.approval_id || p.id);
      if (env.event === "approval.timeout") notice("no answer in time: denied (no response)", true);
      break;
    case "user_input.required":
      inputCard(p, env.turn_id);
      break;
    case "user_input.answered": case "user_input.canceled":
      removeCard("input", p.input_id);
      break;
    case "sandbox.denied":
      notice("sandbox denied " + (p.tool || "") + " " + (p.path || p.host || "") + ": " + (p.reason || ""), true);
      break;
    default:
      break;
  }
  renderFooter();
  scrollDown();
}

function cssId(id) {
  return String(id).replace(/[^A-Za-z0-9_-]/g, "");
}

const TOOL_KINDS = ["command_execution", "tool_call", "file_change", "mcp_tool_call"];

function itemStarted(item, into) {
  if (!item) return;
  const tr = into || $("transcript");
  if (item.kind === "user_message") {
    tr.appendChild(el("div", "msg user", (item.metadata && item.metadata.text) || ""));
  } else if (item.kind === "agent_message") {
    const n = el("div", "msg agent", (item.metadata && item.metadata.text) || "");
    n.dataset.item = cssId(item.id);
    state.nodes.set(item.id, n);
    tr.appendChild(n);
  } else if (TOOL_KINDS.includes(item.kind)) {
    const m = item.metadata || {};
    const cell = el("div", "tool");
    cell.dataset.item = cssId(item.id);
    cell.appendChild(el("div", "cmd", "$ " + describe(m.tool, m.args)));
    cell.appendChild(el("div", "meta", "running…"));
    state.nodes.set(item.id, cell);
    tr.appendChild(cell);
  } else if (item.kind === "context_compaction") {
    tr.appendChild(el("div", "notice", "context compacted"));
  }
}

function describe(tool, args) {
  args = args || {};
  if (tool === "shell") {
    const c = args.command;
    return Array.isArray(c) ? c.join(" ") : String(c || "");
  }
  if (args.path) return tool + " " + args.path;
  return tool || "tool";
}

function itemFinished(item, how) {
  if (!item || !TOOL_KINDS.includes(item.kind)) return;
  const cell = state.nodes.get(item.id);
  if (!cell || !cell.classList.contains("tool")) return;
  const m = item.metadata || {};
  const meta = cell.querySelector(".meta");
  const parts = [m.status || how];
  if (m.exit_code !== undefined && m.exit_code !== null) parts.push("exit " + m.exit_code);
  if (m.duration_ms !== undefined && m.duration_ms !== null) parts.push(m.duration_ms + " ms");
  if (m.approval && m.approval.decided_by && m.approval.decision === "ask") {
    // The gates asked; the outcome says what was answered, and by whom.
    const how = m.approval.outcome === "allow" ? "allowed" : m.approval.outcome === "no_response" ? "no response" : "denied";
    parts.push(how + " by " + m.approval.decided_by);
  }
  if (m.enforced) {
    parts.push(m.enforced.backend + " · " + m.enforced.level);
    state.sandbox = m.enforced.backend + " · " + m.enforced.level;
  }
  meta.textContent = parts.join(" · ");
  if (m.status === "denied" || m.status === "not_run" || (m.approval && m.approval.outcome && m.approval.outcome !== "allow")) {
    cell.classList.add("denied");
  }
  if (m.output_preview && (m.output_preview.head.length || m.output_preview.tail.length)) {
    const lines = m.output_preview.head.slice();
    if (m.output_preview.hidden_lines) lines.push("… " + m.output_preview.hidden_lines + " more lines …");
    lines.push(...m.output_preview.tail);
    cell.appendChild(el("pre", "out", lines.join("\n")));
  }
  if (m.diff) cell.appendChild(el("pre", "diff", m.diff));
}

// ---- requests: approvals and questions (default: deny) ----

function removeCard(kind, id) {
  const c = document.querySelector('.card[data-' + kind + '="' + cssId(id) + '"]');
  if (c) c.remove();
}

function approvalCard(p) {
  if (!p.approval_id || document.querySelector('.card[data-appr="' + cssId(p.approval_id) + '"]')) return;
  const card = el("div", "card");
  card.dataset.appr = cssId(p.approval_id);
  card.setAttribute("role", "alertdialog");
  card.appendChild(el("strong", "", "codewhale asks: " + (p.tool || "tool")));
  card.appendChild(el("div", "what", p.command || p.tool || ""));
  card.appendChild(el("div", "why", p.reason || ""));
  const buttons = el("div", "buttons");
  const deny = el("button", "deny", "Deny");
  deny.type = "button";
  const once = el("button", "allow", "Allow once");
  once.type = "button";
  const always = el("button", "allow", p.hold ? "Allow once (hold)" : "Allow for this session");
  always.type = "button";
  const decide = async (decision, remember) => {
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    try {
      await api("POST", "/v1/approvals/" + encodeURIComponent(p.approval_id), { decision, remember });
      card.remove();
    } catch (e) {
      notice("could not answer: " + e.message, true);
      for (const b of buttons.querySelectorAll("button")) b.disabled = false;
    }
  };
  deny.addEventListener("click", () => decide("deny", false));
  once.addEventListener("click", () => decide("allow", false));
  always.addEventListener("click", () => decide("allow", !p.hold));
  buttons.append(deny, once, always);
  card.appendChild(buttons);
  $("requests").appendChild(card);
  deny.focus(); // the default is deny
}

function inputCard(p, turnId) {
  if (!p.input_id || document.querySelector('.card[data-input="' + cssId(p.input_id) + '"]')) return;
  const card = el("div", "card");
  card.dataset.input = cssId(p.input_id);
  const q = (p.questions && p.questions[0] && (p.questions[0].question || p.questions[0].text)) || p.question || "A question";
  card.appendChild(el("strong", "", q));
  const field = el("input");
  field.type = "text";
  field.setAttribute("aria-label", "Answer");
  const send = el("button", "allow", "Answer");
  send.type = "button";
  send.addEventListener("click", async () => {
    try {
      await api("POST", "/v1/user-input/" + state.current + "/" + encodeURIComponent(p.input_id),
        { answers: [field.value] });
      card.remove();
    } catch (e) {
      notice("could not answer: " + e.message, true);
    }
  });
  const buttons = el("div", "buttons");
  buttons.append(field, send);
  card.appendChild(buttons);
  $("requests").appendChild(card);
  void turnId;
}

// ---- composer: send, steer while a turn runs, interrupt ----

function setRunning(running) {
  $("interrupt").hidden = !running;
  $("send").textContent = running ? "Steer" : "Send";
}

async function submit(ev) {
  ev.preventDefault();
  const text = $("prompt").value;
  if (!text.trim()) return;
  if (!state.current) await newThread();
  try {
    if (state.turn) {
      await api("POST", "/v1/threads/" + state.current + "/turns/" + state.turn + "/steer", { prompt: text });
    } else {
      const r = await api("POST", "/v1/threads/" + state.current + "/turns", { prompt: text });
      state.turn = r.turn.id;
      setRunning(true);
    }
    $("prompt").value = "";
  } catch (e) {
    notice(e.message, true);
  }
}

async function interrupt() {
  if (!state.current || !state.turn) return;
  try {
    await api("POST", "/v1/threads/" + state.current + "/turns/" + state.turn + "/interrupt", {});
  } catch (e) {
    notice(e.message, true);
  }
}

// ---- footer facts ----

function countUsage(turn) {
  if (!turn || !turn.usage) return;
  state.usage.input += turn.usage.input_tokens || 0;
  state.usage.output += turn.usage.output_tokens || 0;
  if (typeof turn.cost_usd === "number") state.usage.cost += turn.cost_usd;
  else if ((turn.usage.input_tokens || 0) + (turn.usage.output_tokens || 0) > 0) state.usage.costKnown = false;
}

function renderFooter() {
  const t = state.thread;
  if (!t) {
    $("footer").textContent = "";
    return;
  }
  // What the thread's last command really ran under (the item's typed
  // `enforced`), until then the tier is chosen per command.
  const sandbox = state.sandbox || "sandbox: chosen per command";
  const cost = state.usage.costKnown ? "$" + state.usage.cost.toFixed(4) : "cost unknown";
  $("footer").textContent = [
    "mode " + t.mode,
    t.auto_approve ? "auto-approve" : "asks",
    sandbox,
    t.model,
    state.usage.input + " in / " + state.usage.output + " out",
    cost,
  ].join(" · ");
}

// ---- start ----

function start() {
  $("composer").addEventListener("submit", submit);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit(e);
  });
  $("interrupt").addEventListener("click", interrupt);
  $("new-thread").addEventListener("click", () => newThread().catch((e) => notice(e.message, true)));
  $("rename").addEventListener("click", () => rename().catch((e) => notice(e.message, true)));
  $("archive").addEventListener("click", () => archive().catch((e) => notice(e.message, true)));
  $("search").addEventListener("input", () => loadThreads().catch(() => {}));
  $("show-archived").addEventListener("change", () => loadThreads().catch(() => {}));
  // Back from the background or the network: pick the stream up again.
  const wake = () => reopen(state.gen);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) wake(); });
  window.addEventListener("online", wake);
  // Offline (a phone leaving Wi-Fi): a stream left open would only stall;
  // close it and reopen from the newest accepted sequence when back.
  window.addEventListener("offline", () => {
    closeStream();
    if (state.current) $("conn").textContent = "offline · reconnecting…";
  });
  if (MOBILE) {
    $("unlock").addEventListener("submit", unlock);
    $("rail-toggle").addEventListener("click", () => document.body.classList.toggle("rail-open"));
    $("token").focus();
    return;
  }
  loadThreads()
    .then(() => { if (state.threads.length) return select(state.threads[0].id); })
    .catch((e) => notice(e.message, true));
}

// The phone page: the typed token is tried on the thread list; the field
// is emptied at once so the token is not left in the document.
async function unlock(ev) {
  ev.preventDefault();
  const field = $("token");
  bearer = field.value.trim();
  field.value = "";
  if (!bearer) return;
  try {
    await loadThreads();
  } catch (e) {
    bearer = null;
    $("unlock-error").textContent = e.message;
    field.focus();
    return;
  }
  $("unlock-error").textContent = "";
  $("unlock").hidden = true;
  $("app").hidden = false;
  if (state.threads.length) await select(state.threads[0].id).catch((e) => notice(e.message, true));
  else document.body.classList.add("rail-open");
}

document.addEventListener("DOMContentLoaded", start);
