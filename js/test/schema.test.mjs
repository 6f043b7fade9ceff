import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { bigintIDSchema, idJSONSchema, snowflakeSchema } from "../dist/index.js";

describe("Standard Schema validators", () => {
  it("declare version 1 and the vendor", () => {
    for (const s of [snowflakeSchema, bigintIDSchema]) {
      assert.equal(s["~standard"].version, 1);
      assert.equal(s["~standard"].vendor, "snowkey");
      assert.equal(typeof s["~standard"].validate, "function");
    }
  });
  it("give the ID, or issues that say what is wrong", () => {
    assert.deepEqual(snowflakeSchema["~standard"].validate("9007199254740993"), { value: "9007199254740993" });
    assert.deepEqual(bigintIDSchema["~standard"].validate("9007199254740993"), { value: 9007199254740993n });
    for (const [v, words] of [["", "empty"], ["12a", "at offset 2"], ["-3", "negative"], [9007199254740993, "number"],
      [null, "not a string"], ["9223372036854775808", "out of range"]]) {
      const r = snowflakeSchema["~standard"].validate(v);
      assert.equal(r.value, undefined);
      assert.equal(r.issues.length, 1, JSON.stringify(r));
      assert.ok(r.issues[0].message.includes(words), `${r.issues[0].message} does not say ${words}`);
    }
  });
  it("describe themselves as JSON Schema, with a pattern that takes every ID's spelling", () => {
    const js = snowflakeSchema["~standard"].jsonSchema.input({ target: "draft-2020-12" });
    assert.deepEqual(js, { ...idJSONSchema });
    const re = new RegExp(js.pattern);
    for (const s of ["0", "1", "9223372036854775807"]) assert.ok(re.test(s), s);
    for (const s of ["", "01", "-1", "1.0", "12345678901234567890"]) assert.ok(!re.test(s), s);
  });
});
