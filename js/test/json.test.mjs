import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { IDError, idReviver, parseJSON, stringifyJSON } from "../dist/index.js";

// What the Go side writes for a post (idtype.ID, sqltype.NullID, sqltype.IDs).
const post = '{"id":"9007199254740993","author_id":"2124375805663379456","parent_id":null,"tag_ids":["1","9223372036854775807"],"title":"hi","count":3}';

describe("parseJSON", () => {
  it("keeps every ID exact and leaves other fields alone", () => {
    assert.deepEqual(parseJSON(post), {
      id: "9007199254740993", author_id: "2124375805663379456", parent_id: null,
      tag_ids: ["1", "9223372036854775807"], title: "hi", count: 3,
    });
    const big = parseJSON(post, { as: "bigint" });
    assert.equal(big.id, 9007199254740993n);
    assert.deepEqual(big.tag_ids, [1n, 9223372036854775807n]);
  });
  it("refuses an ID that arrives as a JSON number, which JSON.parse has already rounded", () => {
    const text = '{"id":9007199254740993}';
    assert.equal(JSON.parse(text).id, 9007199254740992, "the control: plain JSON.parse rounds it");
    assert.throws(() => parseJSON(text), (e) => {
      assert.ok(e instanceof IDError);
      assert.equal(e.kind, "number");
      assert.match(e.message, /field "id" holds a JSON number/);
      return true;
    });
    assert.throws(() => parseJSON('{"tag_ids":["1",2]}'), { kind: "number" });
  });
  it("refuses other kinds and bad spellings, naming the field", () => {
    assert.throws(() => parseJSON('{"id":true}'), { kind: "type" });
    assert.throws(() => parseJSON('{"user_id":{}}'), { kind: "type" });
    assert.throws(() => parseJSON('{"ids":"1"}'), { kind: "type" });
    assert.throws(() => parseJSON('{"ids":[null]}'), { kind: "type" });
    assert.throws(() => parseJSON('{"postId":"007"}'), (e) => e.kind === "syntax" && /field "postId": leading zero/.test(e.message));
    assert.throws(() => parseJSON('{"parentID":"-1"}'), { kind: "negative" });
    assert.throws(() => parseJSON('{"items":[{"id":"9223372036854775808"}]}'), { kind: "range" });
  });
  it("takes the keys it is told", () => {
    assert.deepEqual(parseJSON('{"id":7,"ref":"12"}', { keys: ["ref"] }), { id: 7, ref: "12" });
    assert.throws(() => parseJSON('{"ref":12}', { keys: (k) => k === "ref" }), { kind: "number" });
    assert.deepEqual(parseJSON('{"ids":[1],"refs":["3"]}', { listKeys: ["refs"] }), { ids: [1], refs: ["3"] });
  });
  it("works as a reviver of one's own", () => {
    assert.deepEqual(JSON.parse('[{"id":"5"}]', idReviver()), [{ id: "5" }]);
  });
});

describe("stringifyJSON", () => {
  it("writes bigints as ID strings, which the Go side reads", () => {
    assert.equal(stringifyJSON({ id: 9007199254740993n, n: 1 }), '{"id":"9007199254740993","n":1}');
    assert.throws(() => JSON.stringify({ id: 1n }), TypeError, "the control: plain JSON.stringify cannot");
    assert.throws(() => stringifyJSON({ id: -1n }), { kind: "negative" });
  });
});
