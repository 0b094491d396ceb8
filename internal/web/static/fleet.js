// The Fleet page: a person's agents, live. It talks to hangar's REST API only. The token is
// kept in this tab's session storage and sent in a header; the fleet stream is opened with a
// one-time ticket (an EventSource cannot send headers); the events and process output of the
// agent one opens are read with fetch, whose body streams.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "hangar-token";
const MAX_LOG_ITEMS = 500;
const PAGE = "/fleet/";
// The table's column names, which label a row's cells when rows are cards (a narrow screen).
const COLUMNS = [...document.querySelectorAll("thead th")].map((th) => th.textContent);

const fleet = {
  token: sessionStorage.getItem(TOKEN_KEY),
  es: null,          // the fleet stream
  lastId: "",        // the id of the last fleet event seen, to resume from
  retry: 1000,       // the next reconnect's wait, doubling to 30 s
  timer: 0,
  agents: new Map(), // id → unit
  rows: new Map(),   // id → <tr>
  pending: new Map(), // id → unit: changes waiting for the next frame
  frame: 0,          // the requestAnimationFrame that draws them
  open: null,        // the unit whose detail is shown
  reads: [],         // AbortControllers of the detail's streams
  cancelling: new Set(), // ids of units whose cancel was asked and has not ended them yet
};

function setStatus(text, cls) {
  const s = $("status");
  s.textContent = text;
  s.className = cls || "";
}

function headers() {
  return { Authorization: "Bearer " + fleet.token };
}

// errorText is the sentence of a hangar error answer.
async function errorText(r) {
  try {
    const body = await r.json();
    return body.error.message + (body.error.detail ? " (" + body.error.detail + ")" : "");
  } catch {
    return "HTTP " + r.status;
  }
}

function showSignin(message) {
  $("fleet").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  setStatus(message ? "Signed out." : "Not connected.");
  $("token").focus();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  fleet.token = null;
  stop();
  closeDetail();
  showSignin(message);
}

function stop() {
  if (fleet.es) {
    fleet.es.close();
    fleet.es = null;
  }
  clearTimeout(fleet.timer);
}

function reconnectLater(why) {
  stop();
  const wait = fleet.retry;
  fleet.retry = Math.min(fleet.retry * 2, 30000);
  setStatus(why + " Trying again in " + Math.round(wait / 1000) + " s.", "warn");
  fleet.timer = setTimeout(connect, wait);
}

// connect asks for a ticket and opens the fleet stream, resuming after lastId.
async function connect() {
  stop();
  setStatus("Connecting…");
  let r;
  try {
    r = await fetch("/api/fleet/tickets", { method: "POST", headers: headers() });
  } catch {
    reconnectLater("hangar does not answer.");
    return;
  }
  if (r.status === 401) {
    signOut("hangar refused the token: " + (await errorText(r)) + " Paste a valid one.");
    return;
  }
  if (r.status === 403) {
    signOut("This token may not see a fleet: " + (await errorText(r)));
    return;
  }
  if (!r.ok) {
    reconnectLater("hangar answered " + (await errorText(r)) + ".");
    return;
  }
  const { ticket } = await r.json();
  let url = "/api/fleet/stream?ticket=" + encodeURIComponent(ticket);
  if (fleet.lastId) url += "&since=" + encodeURIComponent(fleet.lastId);
  const es = new EventSource(url);
  fleet.es = es;
  const on = (name, fn) =>
    es.addEventListener(name, (ev) => {
      if (ev.lastEventId) fleet.lastId = ev.lastEventId;
      fn(JSON.parse(ev.data));
    });
  on("snapshot", (f) => {
    fleet.retry = 1000;
    $("signin").hidden = true;
    $("fleet").hidden = false;
    $("signout").hidden = false;
    setStatus("Live: " + f.user + "'s fleet.", "ok");
    snapshot(f);
    followURL();
  });
  on("agent", later);
  on("gone", (g) => {
    fleet.pending.delete(g.id);
    remove(g.id);
  });
  on("inbox", (i) => inbox(i.inbox));
  on("summary", summary);
  on("close", (c) => {
    if (c.reason === "revoked") {
      signOut("The token was revoked. Paste a valid one.");
    } else {
      reconnectLater("The stream ended (" + c.reason + ").");
    }
  });
  // A dropped stream: EventSource would retry with the used ticket, so reconnect with a new one.
  es.onerror = () => {
    if (fleet.es === es) reconnectLater("Lost the connection to hangar.");
  };
}

// later queues a unit's change for the next frame: however many arrive between two frames
// (two hundred agents each changing every 2 s), the rows are redrawn once per frame, and a
// unit that changed twice is drawn once.
function later(u) {
  fleet.pending.set(u.id, u);
  if (!fleet.frame) fleet.frame = requestAnimationFrame(flush);
}

function flush() {
  fleet.frame = 0;
  const units = [...fleet.pending.values()];
  fleet.pending.clear();
  for (const u of units) upsert(u);
}

function snapshot(f) {
  fleet.pending.clear(); // older than the snapshot
  const keep = new Set(f.agents.map((u) => u.id));
  for (const id of [...fleet.rows.keys()]) if (!keep.has(id)) remove(id);
  // Newest first, as the server sorts them.
  for (const u of [...f.agents].reverse()) upsert(u, true);
  inbox(f.inbox);
  summary(f.summary);
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function when(ts) {
  const d = new Date(ts);
  return isNaN(d) ? "" : d.toLocaleTimeString();
}

// upsert shows u: its row is updated in place, or made (at the top: the newest).
function upsert(u) {
  fleet.agents.set(u.id, u);
  if (!cancellable(u)) fleet.cancelling.delete(u.id);
  let tr = fleet.rows.get(u.id);
  if (!tr) {
    tr = document.createElement("tr");
    tr.tabIndex = 0;
    tr.dataset.id = u.id;
    tr.addEventListener("click", () => openDetail(u.id));
    tr.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        openDetail(u.id);
      }
    });
    fleet.rows.set(u.id, tr);
    $("agents").prepend(tr);
  }
  const state = u.stuck ? "stuck" : u.state;
  tr.className = "state-" + state;
  const name = cell(u.name, "name");
  const kind = document.createElement("span");
  kind.className = "kind";
  kind.textContent = u.kind + " · " + u.agent;
  name.append(kind, taskLine(u));
  const last = u.last ? (u.last.kind === "tool_call" ? "$ " : "") + u.last.text : "";
  const stateCell = cell(state, "state");
  const refocus = document.activeElement && tr.contains(document.activeElement) && document.activeElement.matches("button.cancel");
  if (cancellable(u)) stateCell.append(" ", cancelButton(u));
  tr.replaceChildren(
    name,
    stateCell,
    cell(u.sandbox + (u.sandbox_state !== "running" ? " (" + u.sandbox_state + ")" : ""), "sandbox"),
    cell(last, "last"),
    cell(spent(u), "cost"),
    cell(howLong(u, Date.now()), "time"),
  );
  labelCells(tr);
  if (refocus) (tr.querySelector("button.cancel") || tr).focus();
  $("no-agents").hidden = fleet.rows.size > 0;
  if (fleet.open && fleet.open.id === u.id) {
    fleet.open = u;
    showDetailCancel(u);
  }
}

// labelCells names each cell of a row by its column, for the cards of a narrow screen.
function labelCells(tr) {
  [...tr.children].forEach((td, i) => {
    if (COLUMNS[i]) td.dataset.label = COLUMNS[i];
  });
}

// taskLine is what u was asked to do, under its name.
function taskLine(u) {
  const t = document.createElement("span");
  t.className = "task";
  t.textContent = u.task || "";
  return t;
}

// spent is u's cost, or the tokens it used when its agent reports no cost (Codex).
function spent(u) {
  if (u.cost_usd) return "$" + u.cost_usd.toFixed(2);
  if (!u.tokens) return "";
  const n = u.tokens.input + u.tokens.output;
  return (n >= 1000 ? (n / 1000).toFixed(1) + "k" : n) + " tokens";
}

// span is ms for a person: "45s", "3m12s", "1h05m", "2d3h".
function span(ms) {
  const s = Math.max(0, Math.floor(ms / 1000)), m = Math.floor(s / 60), h = Math.floor(m / 60);
  const two = (n) => String(n).padStart(2, "0");
  if (s < 60) return s + "s";
  if (m < 60) return m + "m" + two(s % 60) + "s";
  if (h < 24) return h + "h" + two(m % 60) + "m";
  return Math.floor(h / 24) + "d" + (h % 24) + "h";
}

// howLong is how long u's turn has run (and how long it has been silent, past a minute), or
// how long it took, as the CLI's hangar fleet says it.
function howLong(u, now) {
  if (!u.turn) return "";
  const start = Date.parse(u.turn.started_at || u.started_at);
  if (u.ended_at) return "took " + span(Date.parse(u.ended_at) - start);
  if (!u.turn.started_at) return "";
  const heard = Math.max(start, u.last_activity_at ? Date.parse(u.last_activity_at) : 0);
  const quiet = now - heard;
  return span(now - start) + (quiet > 60000 ? ", silent " + Math.floor(quiet / 60000) + " min" : "");
}

// tick moves every row's time on, each second.
function tick() {
  const now = Date.now();
  for (const [id, tr] of fleet.rows) {
    const td = tr.querySelector(".time"), u = fleet.agents.get(id);
    if (td && u) td.textContent = howLong(u, now);
  }
}
setInterval(tick, 1000);

function remove(id) {
  const tr = fleet.rows.get(id);
  if (tr) tr.remove();
  fleet.rows.delete(id);
  fleet.agents.delete(id);
  $("no-agents").hidden = fleet.rows.size > 0;
  if (fleet.open && fleet.open.id === id) closeDetail();
}

function inbox(items) {
  const ul = $("inbox");
  const focused = ul.contains(document.activeElement) ? document.activeElement.closest("li") : null;
  const at = focused ? [...ul.children].indexOf(focused) : -1;
  ul.replaceChildren(
    ...items.map((it) => {
      const li = document.createElement("li");
      li.className = "inbox-" + it.kind + (it.state ? " state-" + it.state : "");
      li.dataset.id = it.id;
      const t = document.createElement("time");
      t.textContent = when(it.at);
      const b = document.createElement("button");
      b.type = "button";
      b.className = "dismiss";
      b.textContent = "Dismiss";
      b.setAttribute("aria-label", "Dismiss: " + it.text);
      b.addEventListener("click", () => dismiss(it, b));
      li.append(t, " ", openAgentButton(it) || it.text, " ", b);
      return li;
    }),
  );
  $("no-inbox").hidden = items.length > 0;
  // The keyboard stays where it was when the inbox is redrawn: on the same item, or the one now
  // in its place.
  if (focused) {
    const same = ul.querySelector(`li[data-id="${CSS.escape(focused.dataset.id)}"]`);
    if (same) same.querySelector("button.dismiss").focus();
    else focusInbox(at);
  }
}

// openAgentButton is an inbox item's text as a button that opens its agent, when the item is
// about an agent (null otherwise: a sandbox's or a process's item). The agent is looked up on
// the click: an item may come before its agent's row does, or outlive it.
function openAgentButton(it) {
  if (!it.agent) return null;
  const b = document.createElement("button");
  b.type = "button";
  b.className = "open-agent";
  b.textContent = it.text;
  b.addEventListener("click", () => {
    if (fleet.agents.has(it.agent)) openDetail(it.agent);
    else setStatus("That agent is no longer in your fleet.", "warn");
  });
  return b;
}

// focusInbox gives the keyboard to the inbox item at index i (the last one when fewer are
// left), or to the inbox's heading when it is empty.
function focusInbox(i) {
  const items = $("inbox").children;
  if (items.length) items[Math.min(i, items.length - 1)].querySelector("button.dismiss").focus();
  else $("inbox-title").focus();
}

// dismiss takes an item out of the inbox for good; the stream's next inbox event agrees.
async function dismiss(it, b) {
  b.disabled = true;
  let r;
  try {
    r = await fetch("/api/fleet/inbox/" + encodeURIComponent(it.id), { method: "DELETE", headers: headers() });
  } catch {
    b.disabled = false;
    setStatus("hangar is unreachable: the item was not dismissed.", "error");
    return;
  }
  if (r.status === 401) return signOut(await errorText(r));
  if (!r.ok && r.status !== 404) {
    b.disabled = false;
    setStatus("Not dismissed: " + (await errorText(r)), "error");
    return;
  }
  // The inbox may have been redrawn meanwhile: find the item as it is now.
  const now = $("inbox").querySelector(`li[data-id="${CSS.escape(it.id)}"]`);
  const at = now ? [...$("inbox").children].indexOf(now) : 0;
  if (now) now.remove();
  $("no-inbox").hidden = $("inbox").children.length > 0;
  focusInbox(at);
}

function summary(s) {
  const parts = [["agents", s.agents]];
  for (const [state, n] of Object.entries(s.by_state)) parts.push([state, n]);
  parts.push(["inbox", s.inbox], ["today", "$" + s.cost_today_usd.toFixed(2)]);
  $("summary").replaceChildren(
    ...parts.map(([k, v]) => {
      const li = document.createElement("li");
      li.className = "summary-" + k;
      const b = document.createElement("b");
      b.textContent = v;
      li.append(b, " " + k);
      return li;
    }),
  );
}

// readSSE reads a Server-Sent Events response with fetch (so it can send the token in a
// header), calling onEvent(name, id, data) for each event, until it ends or signal aborts.
async function readSSE(path, signal, onEvent) {
  const r = await fetch(path, { headers: headers(), signal });
  if (!r.ok) throw new Error(await errorText(r));
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = "message", id = "", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(name, id, JSON.parse(data));
    }
  }
}

function append(list, el) {
  list.append(el);
  while (list.childElementCount > MAX_LOG_ITEMS) list.firstElementChild.remove();
  el.scrollIntoView({ block: "nearest" });
}

// eventItem is an event as hangar's lines say it (the lines `hangar logs` prints: "$ npm test",
// "→ exit 1", "(thinking)" for a thinking block), its raw JSON one click away.
function eventItem(ev) {
  const li = document.createElement("li");
  li.className = "event event-" + ev.type.replace(/[^a-z0-9_.-]/gi, "");
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  const seq = document.createElement("b");
  seq.textContent = "#" + ev.seq;
  const lines = document.createElement("span");
  lines.className = "lines";
  for (const l of ev.lines && ev.lines.length ? ev.lines : [{ kind: "quiet", text: ev.type }]) {
    const span = document.createElement("span");
    span.className = "line line-" + l.kind.replace(/[^a-z_]/g, "");
    span.textContent = l.text;
    lines.append(span);
  }
  summary.append(seq, " ", lines);
  const raw = document.createElement("pre");
  raw.className = "raw";
  // Drawn when opened: five hundred events' JSON would weigh on the page for nothing.
  details.addEventListener("toggle", () => {
    if (details.open && !raw.textContent) raw.textContent = JSON.stringify(ev.data, null, 2);
  });
  details.append(summary, raw);
  li.append(details);
  return li;
}

// cancellable says whether u's turn can still be cancelled.
function cancellable(u) {
  return (u.state === "running" || u.state === "queued") && (u.kind === "job" || !!u.turn);
}

// cancelButton is a Cancel button for u: "Cancelling…" while its cancel has not ended it.
function cancelButton(u) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "cancel";
  b.disabled = fleet.cancelling.has(u.id);
  b.textContent = b.disabled ? "Cancelling…" : "Cancel";
  b.setAttribute("aria-label", (b.disabled ? "Cancelling " : "Cancel ") + u.name);
  b.addEventListener("click", (ev) => {
    ev.stopPropagation(); // not the row's click, which opens the detail
    cancel(u.id);
  });
  b.addEventListener("keydown", (ev) => ev.stopPropagation()); // Enter is the button's, not the row's
  return b;
}

// showDetailCancel shows the detail's Cancel while u can be cancelled, keeping the focus there.
function showDetailCancel(u) {
  const slot = $("detail-cancel");
  const refocus = slot.contains(document.activeElement);
  slot.replaceChildren(...(cancellable(u) ? [cancelButton(u)] : []));
  if (refocus) (slot.querySelector("button") || $("detail-close")).focus();
}

// cancel asks hangar to cancel the unit's turn (a session's) or job, once the person has
// confirmed it. The row changes when the fleet stream says the turn ended; an answer that it
// has ended already changes it at once.
async function cancel(id) {
  const u = fleet.agents.get(id);
  if (!u || !cancellable(u) || fleet.cancelling.has(id)) return;
  const what = u.kind === "job" ? "the job " + u.name : "the running turn of " + u.name;
  if (!confirm("Cancel " + what + "? Its agent is stopped, with whatever it started. This cannot be undone.")) return;
  fleet.cancelling.add(id);
  upsert(u);
  const path = u.kind === "job"
    ? "/api/jobs/" + encodeURIComponent(u.id) + "/cancel"
    : "/api/sessions/" + encodeURIComponent(u.id) + "/turns/" + encodeURIComponent(u.turn.id) + "/cancel";
  let r;
  try {
    r = await fetch(path, { method: "POST", headers: headers() });
  } catch {
    return cancelFailed(id, "hangar does not answer.");
  }
  if (r.status === 401) return signOut(await errorText(r));
  if (!r.ok) return cancelFailed(id, await errorText(r));
  const body = await r.json();
  const state = body.state;
  const now = fleet.agents.get(id);
  if (now && state && state !== "running" && state !== "queued") {
    upsert({ ...now, state, turn: now.turn && { ...now.turn, state } });
  }
}

function cancelFailed(id, why) {
  fleet.cancelling.delete(id);
  const u = fleet.agents.get(id);
  if (u) upsert(u);
  const text = "Not cancelled: " + why;
  setStatus(text, "error");
  if (fleet.open && fleet.open.id === id) $("detail-error").textContent = text;
}

function closeDetail() {
  for (const c of fleet.reads) c.abort();
  fleet.reads = [];
  fleet.open = null;
  $("detail").hidden = true;
}

// closeToRow closes the detail and gives the keyboard back to the row that opened it.
function closeToRow() {
  const u = fleet.open;
  if (!u) return;
  closeDetail();
  const tr = fleet.rows.get(u.id);
  if (tr) tr.focus();
}

// The detail of an agent has an address, /fleet/sessions/<name> or /fleet/jobs/<id>: opening
// it pushes that address, Back (or Escape, or Close) leaves it, and a reload opens it again
// once signed in.
function agentPath(u) {
  return PAGE + (u.kind === "job" ? "jobs/" + encodeURIComponent(u.id) : "sessions/" + encodeURIComponent(u.name));
}

function pushURL(u) {
  const path = agentPath(u);
  if (location.pathname === path) return;
  // One entry for the open detail, whichever agent: Back returns to the fleet.
  if (history.state && history.state.detail) history.replaceState({ detail: true }, "", path);
  else history.pushState({ detail: true }, "", path);
}

function leaveURL() {
  if (location.pathname === PAGE) return;
  if (history.state && history.state.detail) history.back();
  else history.replaceState(null, "", PAGE);
}

// followURL shows what the address names: an agent's detail, or none.
function followURL() {
  if (!fleet.es) return; // not signed in yet: the first snapshot follows it
  const m = /^\/fleet\/(sessions|jobs)\/([^/]+)$/.exec(location.pathname);
  if (!m) return closeToRow();
  const kind = m[1] === "jobs" ? "job" : "session";
  let key;
  try {
    key = decodeURIComponent(m[2]);
  } catch {
    key = m[2];
  }
  const u = [...fleet.agents.values()].find((a) => a.kind === kind && (kind === "job" ? a.id : a.name) === key);
  if (!u) {
    setStatus($("status").textContent + " It has no " + kind + " " + key + ": the address names none of its agents.", "warn");
    history.replaceState(null, "", PAGE);
    return;
  }
  if (!fleet.open || fleet.open.id !== u.id) openDetail(u.id, true);
}

// openDetail shows an agent's events and its sandbox's processes; fromURL is set when the
// address asked for it (a reload, Back or Forward), which then is not pushed again.
function openDetail(id, fromURL) {
  closeDetail();
  const u = fleet.agents.get(id);
  if (!u) return;
  fleet.open = u;
  if (!fromURL) pushURL(u);
  $("detail").hidden = false;
  $("detail-title").textContent = u.name + " (" + u.kind + " in " + u.sandbox + ")";
  $("detail-error").textContent = "";
  showDetailCancel(u);
  $("events").replaceChildren();
  $("processes").replaceChildren();
  $("output").hidden = true;
  $("detail-close").focus();
  const events = new AbortController();
  fleet.reads.push(events);
  const path = (u.kind === "job" ? "/api/jobs/" : "/api/sessions/") + encodeURIComponent(u.id) + "/events/stream";
  readSSE(path, events.signal, (name, _id, ev) => {
    if (name !== "message") return;
    append($("events"), eventItem(ev));
  }).catch((e) => {
    if (!events.signal.aborted) append($("events"), Object.assign(document.createElement("li"), { className: "error", textContent: "Events: " + e.message }));
  });
  listProcesses(u);
}

async function listProcesses(u) {
  let r;
  try {
    r = await fetch("/api/sandboxes/" + encodeURIComponent(u.sandbox) + "/processes", { headers: headers() });
  } catch {
    return;
  }
  if (!r.ok) {
    $("processes").replaceChildren(Object.assign(document.createElement("li"), { textContent: "Processes: " + (await errorText(r)) }));
    return;
  }
  const { processes } = await r.json();
  if (!processes.length) {
    $("processes").replaceChildren(Object.assign(document.createElement("li"), { textContent: "None." }));
    return;
  }
  $("processes").replaceChildren(
    ...processes.map((p) => {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = p.command + " (" + p.state + (p.exit_code !== null ? " " + p.exit_code : "") + ")";
      b.addEventListener("click", () => attach(u, p));
      li.append(b);
      return li;
    }),
  );
}

// attach shows a process's kept output, then follows it.
function attach(u, p) {
  const out = $("output");
  out.hidden = false;
  out.textContent = "";
  const c = new AbortController();
  fleet.reads.push(c);
  const path = "/api/sandboxes/" + encodeURIComponent(u.sandbox) + "/processes/" + encodeURIComponent(p.process_id) + "/stream";
  readSSE(path, c.signal, (name, _id, ev) => {
    if (name === "output") out.textContent += ev.encoding === "base64" ? atob(ev.data) : ev.data;
    if (name === "end") out.textContent += "\n[" + (ev.status || ev.state) + "]\n";
    if (out.textContent.length > 256 * 1024) out.textContent = out.textContent.slice(-128 * 1024);
  }).catch((e) => {
    if (!c.signal.aborted) out.textContent += "\n[" + e.message + "]\n";
  });
}

$("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  fleet.token = $("token").value.trim();
  $("token").value = "";
  if (!fleet.token) return;
  sessionStorage.setItem(TOKEN_KEY, fleet.token);
  fleet.lastId = "";
  connect();
});
$("signout").addEventListener("click", () => signOut(""));
// Closed by the person: the keyboard goes back to the row, the address back to the fleet's.
function closeByPerson() {
  closeToRow();
  leaveURL();
}
$("detail-close").addEventListener("click", closeByPerson);
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && fleet.open) closeByPerson();
});
window.addEventListener("popstate", followURL);

// signInWith exchanges a one-time sign-in ticket (hangar fleet --web put it in this page's
// address) for the page's own token, as if it had been pasted. A used, expired or unknown
// ticket signs the page out (a token it held is forgotten: the link was meant to replace it),
// saying why in hangar's words above the token field.
async function signInWith(ticket) {
  setStatus("Signing in…");
  let r;
  try {
    r = await fetch("/api/fleet/sign-in", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ticket }),
    });
  } catch {
    signOut("hangar does not answer, so the sign-in link could not be used: run hangar fleet --web again, or paste a token.");
    return;
  }
  if (!r.ok) {
    signOut(await errorText(r));
    return;
  }
  fleet.token = (await r.json()).token;
  sessionStorage.setItem(TOKEN_KEY, fleet.token);
  fleet.lastId = "";
  connect();
}

// The ticket comes in the address's fragment (#ticket=…), which a browser sends to no server
// and in no Referer; it leaves the address, and so the history, before it is used.
const signInTicket = new URLSearchParams(location.hash.slice(1)).get("ticket");
if (signInTicket) {
  history.replaceState(null, "", location.pathname + location.search);
  signInWith(signInTicket);
} else if (fleet.token) connect();
else showSignin("");
