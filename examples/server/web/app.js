// The example's client: plain JavaScript, no build step.
//
// IDs arrive as JSON strings and stay strings: a JavaScript number holds
// integers exactly only up to 2^53, and snowflakes are far above that.
// Arithmetic on them (decoding the time) goes through BigInt.
"use strict";

const EPOCH_MS = 1288834974657n; // idtype.DefaultLayout's epoch (Twitter's)
const WORKER_BITS = 10n;
const SEQUENCE_BITS = 12n;
const TOKEN_KEY = "snowkey-example.token";

// decodeID takes a snowflake apart: the time (ms since the Unix epoch, as
// a Date), the worker number and the sequence.
function decodeID(id) {
  const n = BigInt(id);
  return {
    time: new Date(Number((n >> (WORKER_BITS + SEQUENCE_BITS)) + EPOCH_MS)),
    worker: (n >> SEQUENCE_BITS) & ((1n << WORKER_BITS) - 1n),
    sequence: n & ((1n << SEQUENCE_BITS) - 1n),
  };
}

const $ = (id) => document.getElementById(id);
let nextBefore = null; // the "before" of the next page of posts

function token() { return sessionStorage.getItem(TOKEN_KEY); }

function status(msg, isError) {
  const el = $("status");
  el.textContent = msg;
  el.className = isError ? "error" : "";
}

// api calls the server and returns the parsed JSON (null for 204). A 401
// on an authenticated call means the session is over: back to the login.
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const t = token();
  if (t) headers["Authorization"] = "Bearer " + t;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  if (text && (res.headers.get("Content-Type") || "").startsWith("application/json")) data = JSON.parse(text);
  if (!res.ok) {
    if (res.status === 401 && t) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLoggedOut();
    }
    const err = new Error((data && data.error) || text.trim() || res.statusText);
    err.status = res.status;
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

function postRow(p) {
  const d = decodeID(p.id);
  const tr = document.createElement("tr");
  tr.dataset.id = p.id;
  cell(tr, p.id, "id");
  cell(tr, d.time.toISOString(), "time");
  cell(tr, d.worker + " · " + d.sequence);
  const title = cell(tr, p.title, "title");
  if (p.body) {
    const body = document.createElement("div");
    body.className = "body";
    body.textContent = p.body;
    title.appendChild(body);
  }
  cell(tr, p.author_email);
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
    cell(tr, s.id, "id");
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
  $("me-id").textContent = me.id;
  $("me-time").textContent = decodeID(me.id).time.toISOString();
  $("account").hidden = true;
  $("app").hidden = false;
  await Promise.all([loadPosts(false), loadSessions()]);
}

function showLoggedOut() {
  $("account").hidden = false;
  $("app").hidden = true;
  $("posts").replaceChildren();
  $("sessions").replaceChildren();
}

// run reports what fn throws in the status line.
async function run(fn) {
  try {
    await fn();
  } catch (e) {
    status(e.message, true);
  }
}

function credentials() {
  return { email: $("email").value, password: $("password").value };
}

document.addEventListener("DOMContentLoaded", () => {
  $("signup").addEventListener("click", () => run(async () => {
    const u = await api("POST", "/api/signup", credentials());
    status("Signed up: user ID " + u.id + ", created " + decodeID(u.id).time.toISOString() + ". Now log in.");
  }));
  $("auth-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(async () => {
      const body = credentials();
      if ($("device").value) body.device = $("device").value;
      const res = await api("POST", "/api/login", body);
      sessionStorage.setItem(TOKEN_KEY, res.token);
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
      // The list first, then the status: a reader (or a test) that sees
      // "Posted" finds the post in the list.
      await loadPosts(false);
      status("Posted: ID " + p.id + ".");
    });
  });
  $("older").addEventListener("click", () => run(() => loadPosts(true)));
  $("logout").addEventListener("click", () => run(async () => {
    await api("POST", "/api/logout");
    sessionStorage.removeItem(TOKEN_KEY);
    showLoggedOut();
    status("Logged out.");
  }));
  $("logout-all").addEventListener("click", () => run(async () => {
    const r = await api("POST", "/api/logout-all");
    sessionStorage.removeItem(TOKEN_KEY);
    showLoggedOut();
    status("Logged out everywhere: " + r.revoked + " sessions ended.");
  }));
  if (token()) run(showLoggedIn);
});
