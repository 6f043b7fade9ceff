// The example's API flow from Node, with the built-in fetch and BigInt, as
// an app uses it (the token in "Authorization: Bearer"): sign up, follow
// the link the development outbox holds, log in, post, read the post back,
// list posts and sessions, log out, and see the API refuse the token; and
// a browser-style login, whose token comes in a cookie and never in the
// body. Run by TestNode:
//
//   node testdata/e2e.mjs <base URL> <email> <password>
//
// It prints one JSON object on stdout, IDs as strings, and exits non-zero
// with the reason on stderr when a step fails.
import assert from "node:assert/strict";

const [base, email, password] = process.argv.slice(2);
const EPOCH_MS = 1288834974657n;

async function api(method, path, { token, body } = {}) {
  const headers = {};
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const json = res.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : null;
  return { status: res.status, headers: res.headers, json, text };
}

// idTime decodes the time of a snowflake: exact only through BigInt.
function idTime(id) {
  assert.equal(typeof id, "string", `IDs must be JSON strings, got ${typeof id} ${id}`);
  return new Date(Number((BigInt(id) >> 22n) + EPOCH_MS)).toISOString();
}

function expect(r, status, what) {
  assert.equal(r.status, status, `${what}: status ${r.status}, body ${r.text}`);
  return r.json;
}

expect(await api("POST", "/api/signup", { body: { email, password, name: "Node" } }), 202, "signup");
// The link went to the address; on a development server the outbox has it.
const outbox = expect(await api("GET", "/api/dev/outbox"), 200, "outbox");
const mail = outbox.messages.find((m) => m.to === email);
const link = /#verify=([A-Za-z0-9_-]+)/.exec(mail?.body ?? "");
assert.ok(link, `no sign-up link to ${email} in ${JSON.stringify(outbox)}`);
assert.equal(
  (await api("POST", "/api/login", { body: { email, password } })).status, 401, "login before the link is followed");
const verified = expect(await api("POST", "/api/verify", { body: { token: link[1], password } }), 200, "verify");
assert.ok(verified.token.startsWith("snk_"), `verify answered ${JSON.stringify(verified)}`);

const login = expect(await api("POST", "/api/login", { body: { email, password, device: "node" } }), 200, "login");
const token = login.token;
const user = { id: login.session.user_id };
idTime(user.id);
assert.ok(BigInt(user.id) > 2n ** 53n, `user ID ${user.id} is not above 2^53`);

const me = expect(await api("GET", "/api/me", { token }), 200, "me");
assert.equal(me.id, user.id);
// Go prints no fraction for a whole second; compare the instants.
assert.equal(new Date(me.created_at).getTime(), new Date(idTime(user.id)).getTime());

const post = expect(await api("POST", "/api/posts", { token, body: { title: "hello from node", body: "BigInt" } }), 201, "post");
assert.equal(post.author_id, user.id);
assert.equal(post.author_name, "Node");
assert.equal(post.author_email, undefined);
const again = expect(await api("GET", "/api/posts/" + post.id, { token }), 200, "get post");
assert.equal(again.id, post.id);

const page = expect(await api("GET", "/api/posts?limit=100", { token }), 200, "list posts");
assert.ok(page.posts.some((p) => p.id === post.id), "the new post is not listed");
for (let i = 1; i < page.posts.length; i++) {
  assert.ok(BigInt(page.posts[i - 1].id) > BigInt(page.posts[i].id), "posts are not newest first");
}

const sessions = expect(await api("GET", "/api/sessions", { token }), 200, "sessions");
assert.equal(sessions.current, login.session.id);
assert.equal(sessions.sessions.length, 2); // the verification's and this login's

// A browser's login: the token in an HttpOnly cookie, not in the body.
const cookieLogin = await api("POST", "/api/login", { body: { email, password, cookie: true } });
const cookieBody = expect(cookieLogin, 200, "cookie login");
assert.equal(cookieBody.token, undefined, `the cookie login's body holds a token: ${cookieLogin.text}`);
assert.ok(!cookieLogin.text.includes("snk_"), `the cookie login's body holds a token: ${cookieLogin.text}`);
const setCookie = cookieLogin.headers.getSetCookie().find((c) => c.startsWith("__Host-session="));
assert.match(setCookie ?? "", /^__Host-session=snk_[^;]+; Path=\/; HttpOnly; Secure; SameSite=Lax$/, `Set-Cookie ${setCookie}`);

expect(await api("POST", "/api/logout", { token }), 204, "logout");
const after = await api("GET", "/api/me", { token });
expect(after, 401, "me after logout");

process.stdout.write(JSON.stringify({
  user_id: user.id,
  session_id: login.session.id,
  post_id: post.id,
  // Each listed post with the time decoded here, and what a JS number
  // would have made of its ID.
  posts: page.posts.map((p) => ({ id: p.id, time: idTime(p.id), as_number: String(Number(p.id)) })),
  after_logout: after.status,
  www_authenticate: after.headers.get("www-authenticate"),
}) + "\n");
