// What a browser-side client meets at the API's limits, from Node with
// the built-in fetch: bodies that are not JSON get 415, and a burst of
// wrong passwords gets 429 with Retry-After. Run by TestNodeLimits:
//
//   node testdata/limits.mjs <base URL> <email> <guesses>
//
// It prints one JSON object on stdout and exits non-zero with the reason
// on stderr when a step fails.
import assert from "node:assert/strict";

const [base, email, guessArg] = process.argv.slice(2);
const guesses = Number(guessArg);
const creds = JSON.stringify({ email, password: "not-the-password-1" });

async function post(path, body, contentType) {
  const headers = {};
  if (contentType) headers["Content-Type"] = contentType;
  const res = await fetch(base + path, { method: "POST", headers, body });
  const text = await res.text();
  const json = res.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : null;
  return { status: res.status, retryAfter: res.headers.get("retry-after"), json, text };
}

// 415: the bodies a page on another origin can send without a CORS
// preflight (text/plain, a form), a body with no type at all (a Blob
// without one), and JSON in another charset.
const unsupported = {};
for (const [name, path, body, type] of [
  ["text/plain signup", "/api/signup", creds, "text/plain;charset=UTF-8"],
  ["form signup", "/api/signup", new URLSearchParams({ email, password: "x" }), undefined],
  ["untyped signup", "/api/signup", new Blob([creds]), undefined],
  ["text/plain login", "/api/login", creds, "text/plain"],
  ["latin1 login", "/api/login", creds, "application/json; charset=latin1"],
]) {
  const r = await post(path, body, type);
  assert.equal(r.status, 415, `${name}: status ${r.status}, body ${r.text}`);
  assert.match(r.json.error, /JSON|Content-Type/, `${name}: error ${r.text}`);
  unsupported[name] = r.status;
}

// 429: guesses at one account, all at once.
const answers = await Promise.all(Array.from({ length: guesses }, () => post("/api/login", creds, "application/json")));
const counts = {};
const waits = [];
for (const r of answers) {
  counts[r.status] = (counts[r.status] || 0) + 1;
  if (r.status === 429) {
    assert.match(r.retryAfter ?? "", /^[1-9][0-9]*$/, `429 with Retry-After ${r.retryAfter}`);
    assert.ok(r.json.error.includes(`try again in ${r.retryAfter} s`), `429 says ${r.json.error}, Retry-After ${r.retryAfter}`);
    waits.push(Number(r.retryAfter));
  }
}

process.stdout.write(JSON.stringify({ unsupported, counts, waits }) + "\n");
