import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { compareIDs, formatID, IDError, isSnowflake, MAX_ID, maxID, minID, parseID, sortIDs, toBigInt, toSnowflake } from "../dist/index.js";

// Every kind of refusal, with the offset a syntax error names.
const bad = [
  ["", "empty", -1],
  ["-1", "negative", -1],
  ["-0", "negative", -1],
  ["-", "syntax", 0],
  ["-x", "syntax", 0],
  ["+1", "syntax", 0],
  ["007", "syntax", 0],
  ["00", "syntax", 0],
  ["1.5", "syntax", 1],
  ["1e3", "syntax", 1],
  [" 1", "syntax", 0],
  ["1 ", "syntax", 1],
  ["12a", "syntax", 2],
  ["0x10", "syntax", 1],
  ["1_000", "syntax", 1],
  ["١٢", "syntax", 0],
  ["99999999999999999999x", "syntax", 20],
  ["9223372036854775808", "range", -1],
  ["18446744073709551616", "range", -1],
  ["1" + "0".repeat(40), "range", -1],
];

describe("parseID", () => {
  it("reads the one spelling exactly, past 2^53", () => {
    assert.equal(parseID("0"), 0n);
    assert.equal(parseID("9007199254740993"), 9007199254740993n);
    assert.equal(parseID("9223372036854775807"), MAX_ID);
    assert.equal(MAX_ID, 2n ** 63n - 1n);
    // What Number would have made of it: the reason for all this.
    assert.notEqual(String(Number("9007199254740993")), "9007199254740993");
  });
  for (const [input, kind, offset] of bad) {
    it(`refuses ${JSON.stringify(input)} as ${kind}`, () => {
      assert.throws(() => parseID(input), (e) => {
        assert.ok(e instanceof IDError, `${e} is not an IDError`);
        assert.equal(e.name, "IDError");
        assert.equal(e.kind, kind);
        assert.equal(e.offset, offset);
        assert.match(e.message, /^snowkey: ".*" is not an ID: /);
        return true;
      });
      assert.equal(isSnowflake(input), false);
    });
  }
  it("names the character and the kind of mistake", () => {
    assert.throws(() => parseID("1.5"), { message: 'snowkey: "1.5" is not an ID: fraction "." at offset 1' });
    assert.throws(() => parseID("007"), { message: 'snowkey: "007" is not an ID: leading zero at offset 0' });
  });
  it("cuts a long input in its message", () => {
    assert.throws(() => parseID("x".repeat(1000)), (e) => e.input.length < 80);
  });
  it("refuses what is not a string", () => {
    for (const v of [7, 7n, null, undefined, {}, ["1"]]) {
      assert.throws(() => parseID(v), (e) => e instanceof IDError && e.kind === "type");
      assert.equal(isSnowflake(v), false);
    }
  });
});

describe("formatID and toSnowflake", () => {
  it("write the one spelling, and refuse non-IDs", () => {
    assert.equal(formatID(0n), "0");
    assert.equal(formatID(MAX_ID), "9223372036854775807");
    assert.throws(() => formatID(-1n), { kind: "negative" });
    assert.throws(() => formatID(MAX_ID + 1n), { kind: "range" });
    assert.throws(() => formatID(5), { kind: "type" });
    assert.equal(toSnowflake("42"), "42");
    assert.equal(toSnowflake(42n), "42");
    assert.throws(() => toSnowflake("042"), { kind: "syntax" });
    assert.equal(toBigInt("42"), 42n);
    assert.throws(() => toBigInt(-1n), { kind: "negative" });
  });
  it("isSnowflake agrees with parseID at the top of the range", () => {
    for (const s of ["9223372036854775806", "9223372036854775807", "9223372036854775808", "9300000000000000000", "1000000000000000000"]) {
      let ok = true;
      try {
        parseID(s);
      } catch {
        ok = false;
      }
      assert.equal(isSnowflake(s), ok, s);
    }
  });
});

describe("order", () => {
  // Lexical order puts "999" after "1000"; numeric order does not.
  const ids = ["1000", "999", "9223372036854775807", "0", "9007199254740993", "9007199254740992"];
  const want = ["0", "999", "1000", "9007199254740992", "9007199254740993", "9223372036854775807"];
  it("compareIDs sorts numerically", () => {
    assert.notDeepEqual([...ids].sort(), want, "the control: lexical order differs");
    assert.deepEqual([...ids].sort(compareIDs), want);
    assert.equal(compareIDs("999", "1000"), -1);
    assert.equal(compareIDs(1000n, "1000"), 0);
    assert.equal(compareIDs("9007199254740993", "9007199254740992"), 1);
    assert.throws(() => compareIDs("1", "01"), { kind: "syntax" });
  });
  it("sortIDs returns a sorted copy, either way, keeping each element's type", () => {
    const mixed = ["1000", 999n, "5"];
    assert.deepEqual(sortIDs(mixed), ["5", 999n, "1000"]);
    assert.deepEqual(sortIDs(mixed, "desc"), ["1000", 999n, "5"]);
    assert.deepEqual(mixed, ["1000", 999n, "5"], "the input is left alone");
    assert.deepEqual(sortIDs(ids), want);
  });
  it("minID and maxID", () => {
    assert.equal(minID(ids), "0");
    assert.equal(maxID(ids), "9223372036854775807");
    assert.equal(maxID(["999", "1000"]), "1000");
    assert.equal(minID([]), undefined);
    assert.equal(maxID([]), undefined);
    assert.throws(() => maxID(["1", "x"]), { kind: "syntax" });
  });
});
