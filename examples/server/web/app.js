// The example's client: plain JavaScript, no build step.
//
// IDs arrive as JSON strings and stay strings: a JavaScript number holds
// integers exactly only up to 2^53, and snowflakes are far above that.
// Parsing, checking and decoding them is the snowkey package's (js/ in
// the repository; snowkey.js is its build, served beside this file).
//
// The page never holds its login token: the login asks for it in an
// HttpOnly cookie, which the browser sends with every request to the
// server and which no script, this one included, can read.
import { decodeID as decode, layoutFromServer, parseID as parse, parseJSON, timeBits } from "/snowkey.js";

// The layout of every ID, as GET /api/layout reports it: loaded before
// anything else on the page runs.
let layout = null;

async function loadLayout() {
  const res = await fetch("/api/layout");
  if (!res.ok) throw new Error("GET /api/layout: " + res.status);
  layout = layoutFromServer(await res.json());
}

// parseID reads a decimal ID exactly, as a BigInt, or throws an Error
// that says what is wrong with it, in the words of the package's
// IDError.kind.
function parseID(text) {
  try {
    return parse(String(text).trim());
  } catch (e) {
    switch (e.kind) {
      case "empty":
        throw new Error("type an ID: a decimal number such as 1541815603606036480");
      case "range":
        throw new Error("an ID is at most 2^63-1 = 9223372036854775807: this one has more than 63 bits");
      default:
        throw new Error("an ID has only the digits 0-9, no sign, space or other character, and no leading zero (" + e.detail + ")");
    }
  }
}

// decodeID takes a snowflake apart with the server's layout: the time (a
// Date and Unix milliseconds), the worker number and the sequence.
function decodeID(id) {
  return decode(id, layout);
}

const $ = (id) => document.getElementById(id);
let nextBefore = null; // the "before" of the next page of posts

// loggedIn is whether the page shows the signed-in view; a 401 ends it.
let loggedIn = false;

function status(msg, isError) {
  const el = $("status");
  el.textContent = msg;
  el.className = isError ? "error" : "";
}

// api calls the server and returns the parsed JSON (null for 204), read
// by the package's parseJSON: every ID field (id, user_id, ...) stays its
// exact string, and an ID sent as a JSON number, which JSON.parse would
// round, fails the call instead. The browser sends the login cookie by
// itself. A 401 on an authenticated
// call means the session is over: back to the login.
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  if (text && (res.headers.get("Content-Type") || "").startsWith("application/json")) data = parseJSON(text);
  if (!res.ok) {
    if (res.status === 401 && loggedIn) showLoggedOut();
    const err = new Error((data && data.error) || text.trim() || res.statusText);
    err.status = res.status;
    const wait = Number.parseInt(res.headers.get("Retry-After") || "", 10);
    if (Number.isInteger(wait) && wait > 0) err.retryAfter = wait;
    throw err;
  }
  return data;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

// idCell adds a cell that shows an ID; clicking it opens the ID in the
// inspector.
function idCell(tr, id) {
  const td = cell(tr, id, "id");
  td.title = "Inspect this ID";
  td.addEventListener("click", () => inspect(id));
  return td;
}

function postRow(p) {
  const d = decodeID(p.id);
  const tr = document.createElement("tr");
  tr.dataset.id = p.id;
  idCell(tr, p.id);
  cell(tr, d.time.toISOString(), "time");
  cell(tr, d.worker + " · " + d.sequence);
  const title = cell(tr, p.title, "title");
  if (p.body) {
    const body = document.createElement("div");
    body.className = "body";
    body.textContent = p.body;
    title.appendChild(body);
  }
  cell(tr, p.author_name || "(no name)", "author");
  return tr;
}

async function loadPosts(more) {
  const q = more && nextBefore ? "?before=" + encodeURIComponent(nextBefore) : "";
  const page = await api("GET", "/api/posts" + q);
  const tbody = $("posts");
  if (!more) tbody.replaceChildren();
  for (const p of page.posts) tbody.appendChild(postRow(p));
  nextBefore = page.next;
  $("older").hidden = !nextBefore;
}

async function loadSessions() {
  const list = await api("GET", "/api/sessions");
  const tbody = $("sessions");
  tbody.replaceChildren();
  for (const s of list.sessions) {
    const tr = document.createElement("tr");
    tr.dataset.id = s.id;
    if (s.current) tr.className = "current";
    idCell(tr, s.id);
    cell(tr, decodeID(s.id).time.toISOString(), "time");
    cell(tr, new Date(s.last_seen_at).toISOString(), "time");
    cell(tr, [s.device, s.user_agent, s.ip].filter(Boolean).join(" · "));
    const td = cell(tr, s.current ? "this device" : "");
    if (!s.current) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Log out this device";
      b.addEventListener("click", () => run(async () => {
        await api("DELETE", "/api/sessions/" + encodeURIComponent(s.id));
        status("Logged out session " + s.id + ".");
        await loadSessions();
      }));
      td.appendChild(b);
    }
    tbody.appendChild(tr);
  }
}

async function showLoggedIn() {
  const me = await api("GET", "/api/me");
  $("me-email").textContent = me.email;
  $("me-name").textContent = me.name;
  $("me-id").textContent = me.id;
  $("me-time").textContent = decodeID(me.id).time.toISOString();
  $("account").hidden = true;
  $("verify").hidden = true;
  $("app").hidden = false;
  loggedIn = true;
  await Promise.all([loadPosts(false), loadSessions()]);
}

function showLoggedOut() {
  loggedIn = false;
  $("account").hidden = false;
  $("app").hidden = true;
  $("posts").replaceChildren();
  $("sessions").replaceChildren();
}

// run reports what fn throws in the status line. A 429 or 503 says how
// long to wait (the answer's Retry-After), and the account buttons stay
// disabled until then.
async function run(fn) {
  try {
    await fn();
  } catch (e) {
    if ((e.status === 429 || e.status === 503) && e.retryAfter) {
      // The message says "try again in N s"; the buttons count the
      // same N seconds down, from the answer's Retry-After.
      status(e.message.charAt(0).toUpperCase() + e.message.slice(1) + ".", true);
      holdAccountButtons(e.retryAfter);
      return;
    }
    status(e.message, true);
  }
}

// holdAccountButtons disables sign-up and log-in for secs seconds,
// counting down on the log-in button.
let holdTimer = null;
function holdAccountButtons(secs) {
  const login = $("login"), signup = $("signup");
  clearInterval(holdTimer);
  let left = secs;
  const tick = () => {
    if (left <= 0) {
      clearInterval(holdTimer);
      login.disabled = signup.disabled = false;
      login.textContent = "Log in";
      return;
    }
    login.disabled = signup.disabled = true;
    login.textContent = "Log in (" + left + " s)";
    left--;
  };
  tick();
  holdTimer = setInterval(tick, 1000);
}

function credentials() {
  return { email: $("email").value, password: $("password").value };
}

// The development outbox: the mails the server sent, shown when the server
// has one (make run without SMTP_URL); its links finish sign-ups.
async function loadOutbox() {
  const res = await fetch("/api/dev/outbox");
  if (!res.ok) return; // a server that sends real mail has none
  const { messages } = await res.json();
  const list = $("outbox-mail");
  list.replaceChildren();
  for (const m of messages) {
    const li = document.createElement("li");
    const head = document.createElement("strong");
    head.textContent = m.subject;
    li.append(head, " to " + m.to + ", " + m.sent_at);
    const body = document.createElement("div");
    body.className = "body";
    // Text with its links made clickable, built from DOM nodes: the body
    // is never parsed as HTML.
    for (const part of m.body.split(/(https?:\/\/\S+)/)) {
      if (/^https?:\/\//.test(part)) {
        const a = document.createElement("a");
        a.href = part;
        a.textContent = part;
        body.append(a);
      } else {
        body.append(part);
      }
    }
    li.append(body);
    list.appendChild(li);
  }
  $("outbox").hidden = false;
}

// verifyToken is the token of the sign-up link the page was opened with
// (#verify=…), or "". The fragment never reaches the server or its logs.
function verifyToken() {
  const m = /^#verify=([A-Za-z0-9_-]+)$/.exec(location.hash);
  return m ? m[1] : "";
}

function showVerify() {
  if (!verifyToken()) return;
  $("verify").hidden = false;
  status("Type the password you signed up with to finish.");
  $("verify-password").focus();
}

// The ID inspector: an ID's time, worker and sequence, and its 64 bits
// drawn as the fields of the server's layout.
function inspect(text) {
  const input = $("inspect-id");
  if (text !== undefined) input.value = text;
  const out = $("inspect-out"), err = $("inspect-error");
  let n;
  try {
    n = parseID(input.value);
  } catch (e) {
    err.textContent = e.message;
    out.hidden = true;
    return;
  }
  err.textContent = "";
  const d = decodeID(n);
  $("inspect-decimal").textContent = n.toString();
  $("inspect-time").textContent = d.time.toISOString();
  $("inspect-ms").textContent = String(d.timestamp - layout.epoch);
  $("inspect-worker").textContent = String(d.worker);
  $("inspect-sequence").textContent = String(d.sequence);
  const l = layout;
  const fields = [
    ["sign", 1],
    ["time", timeBits(l)],
    ["worker", l.workerBits],
    ["sequence", l.sequenceBits],
  ];
  const bits = n.toString(2).padStart(64, "0");
  const box = $("inspect-bits");
  box.replaceChildren();
  let i = 0;
  for (const [name, width] of fields) {
    const group = document.createElement("span");
    group.className = "field f-" + name;
    group.title = name + ": " + width + (width === 1 ? " bit" : " bits");
    for (let k = 0; k < width; k++, i++) {
      const b = document.createElement("span");
      b.className = "bit f-" + name;
      b.textContent = bits[i];
      group.appendChild(b);
    }
    box.appendChild(group);
  }
  $("inspect-legend").textContent = fields.map(([name, width]) => name + " " + width).join(" · ") + " bits, epoch " +
    new Date(l.epoch).toISOString();
  out.hidden = false;
}

document.addEventListener("DOMContentLoaded", async () => {
  await run(setUp);
  // The page has done what it does on load, or shows why it could not.
  document.body.dataset.ready = "true";
});

// setUp loads the layout, sets the page's handlers up, shows the outbox
// and the logged-in view if the browser holds a valid cookie.
async function setUp() {
  await loadLayout();
  $("inspect-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    inspect();
  });
  $("me-id").addEventListener("click", () => inspect($("me-id").textContent));
  $("signup").addEventListener("click", () => run(async () => {
    const body = credentials();
    body.name = $("name").value;
    await api("POST", "/api/signup", body);
    // The same answer whether the email was new or not: signup does
    // not tell who has an account; the mail does, to the address's owner.
    status("Check your mailbox: the link in it finishes the sign-up.");
    await loadOutbox();
  }));
  $("outbox-refresh").addEventListener("click", () => run(loadOutbox));
  window.addEventListener("hashchange", showVerify);
  $("verify-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(async () => {
      const body = { token: verifyToken(), password: $("verify-password").value, cookie: true };
      if ($("device").value) body.device = $("device").value;
      const res = await api("POST", "/api/verify", body);
      $("verify-password").value = "";
      history.replaceState(null, "", location.pathname);
      status("Signed up and logged in: session " + res.session.id + ".");
      await showLoggedIn();
    });
  });
  $("password-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(async () => {
      const r = await api("POST", "/api/password", { current_password: $("current-password").value, new_password: $("new-password").value });
      $("current-password").value = "";
      $("new-password").value = "";
      status("Password changed: " + r.revoked + " other sessions ended.");
      await loadSessions();
    });
  });
  $("auth-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(async () => {
      const body = credentials();
      body.cookie = true;
      if ($("device").value) body.device = $("device").value;
      const res = await api("POST", "/api/login", body);
      $("password").value = "";
      status("Logged in: session " + res.session.id + ".");
      await showLoggedIn();
    });
  });
  $("post-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(async () => {
      const p = await api("POST", "/api/posts", { title: $("post-title").value, body: $("post-body").value });
      $("post-title").value = "";
      $("post-body").value = "";
      // The status comes once the list shows the post.
      await loadPosts(false);
      status("Posted: ID " + p.id + ".");
    });
  });
  $("older").addEventListener("click", () => run(() => loadPosts(true)));
  $("logout").addEventListener("click", () => run(async () => {
    await api("POST", "/api/logout"); // the answer deletes the cookie
    showLoggedOut();
    status("Logged out.");
  }));
  $("logout-all").addEventListener("click", () => run(async () => {
    const r = await api("POST", "/api/logout-all");
    showLoggedOut();
    status("Logged out everywhere: " + r.revoked + " sessions ended.");
  }));
  await loadOutbox();
  // Logged in already if the browser holds a valid cookie.
  const me = await fetch("/api/me");
  if (me.ok) {
    await showLoggedIn();
  } else {
    showVerify();
  }
}
