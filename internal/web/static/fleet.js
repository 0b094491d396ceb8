// The Fleet page: a person's agents, live. It talks to hangar's REST API only. The token is
// kept in this tab's session storage and sent in a header; the fleet stream is opened with a
// one-time ticket (an EventSource cannot send headers); the events and process output of the
// agent one opens are read with fetch, whose body streams.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "hangar-token";
const MAX_LOG_ITEMS = 500;

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
  tr.setAttribute("aria-label", u.name + ", " + state);
  const name = cell(u.name, "name");
  const kind = document.createElement("span");
  kind.className = "kind";
  kind.textContent = u.kind + " · " + u.agent;
  name.append(kind, taskLine(u));
  const last = u.last ? (u.last.kind === "tool_call" ? "$ " : "") + u.last.text : "";
  tr.replaceChildren(
    name,
    cell(state, "state"),
    cell(u.sandbox + (u.sandbox_state !== "running" ? " (" + u.sandbox_state + ")" : ""), "sandbox"),
    cell(last, "last"),
    cell(spent(u), "cost"),
    cell(howLong(u, Date.now()), "time"),
  );
  $("no-agents").hidden = fleet.rows.size > 0;
  if (fleet.open && fleet.open.id === u.id) fleet.open = u;
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
      b.addEventListener("click", () => dismiss(it, li, b));
      li.append(t, " " + it.text + " ", b);
      return li;
    }),
  );
  $("no-inbox").hidden = items.length > 0;
}

// dismiss takes an item out of the inbox for good; the stream's next inbox event agrees.
async function dismiss(it, li, b) {
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
  const next = li.nextElementSibling || li.previousElementSibling;
  li.remove();
  $("no-inbox").hidden = $("inbox").children.length > 0;
  if (next) next.querySelector("button").focus();
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

function describe(ev) {
  const d = ev.data;
  if (ev.type === "turn.finished" && d) {
    // hangar's end of a turn: its state, how the agent ended and why (the agent's error, or its stderr's last lines).
    return [d.status, d.exit_code !== null && d.exit_code !== undefined ? "exit " + d.exit_code : "", d.signal || "", d.reason || ""].filter(Boolean).join(", ").slice(0, 600);
  }
  if (ev.type === "system" && d && d.subtype === "api_retry") {
    return "API call failed, retry " + d.attempt + (d.max_retries ? " of " + d.max_retries : "") + ": " + (d.error || "") + (d.error_status ? " (HTTP " + d.error_status + ")" : "");
  }
  if (ev.type === "system" && d && d.subtype === "init") {
    return "run started" + (d.model ? ": model " + d.model : "") + (d.cwd ? ", in " + d.cwd : "");
  }
  if (typeof d === "object" && d) {
    const text = d.result || d.text || (d.message && typeof d.message === "object" && JSON.stringify(d.message.content)) || "";
    return text ? String(text).slice(0, 300) : JSON.stringify(d).slice(0, 300);
  }
  return String(d).slice(0, 300);
}

function closeDetail() {
  for (const c of fleet.reads) c.abort();
  fleet.reads = [];
  fleet.open = null;
  $("detail").hidden = true;
}

function openDetail(id) {
  closeDetail();
  const u = fleet.agents.get(id);
  if (!u) return;
  fleet.open = u;
  $("detail").hidden = false;
  $("detail-title").textContent = u.name + " (" + u.kind + " in " + u.sandbox + ")";
  $("events").replaceChildren();
  $("processes").replaceChildren();
  $("output").hidden = true;
  $("detail-close").focus();
  const events = new AbortController();
  fleet.reads.push(events);
  const path = (u.kind === "job" ? "/api/jobs/" : "/api/sessions/") + encodeURIComponent(u.id) + "/events/stream";
  readSSE(path, events.signal, (name, _id, ev) => {
    if (name !== "message") return;
    const li = document.createElement("li");
    li.className = "event-" + ev.type.replace(/[^a-z0-9_.-]/gi, "");
    const b = document.createElement("b");
    b.textContent = "#" + ev.seq + " " + ev.type;
    li.append(b, " " + describe(ev));
    append($("events"), li);
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
$("detail-close").addEventListener("click", closeDetail);
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && fleet.open) closeDetail();
});

if (fleet.token) connect();
else showSignin("");
