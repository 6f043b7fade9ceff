// Checks the package against the vectors that the Go side writes at test
// time (go test ./js runs this with SNOWKEY_VECTORS set, see
// conformance_test.go) and writes what it checked and every mismatch to
// SNOWKEY_REPORT, for the Go side to read.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { it } from "node:test";

import { check } from "./conformance.js";

const path = process.env.SNOWKEY_VECTORS;

it("agrees with the Go side on every vector", { skip: path ? false : "SNOWKEY_VECTORS is not set: run `go test ./js` from the repository root" }, () => {
  const { checked, mismatches } = check(JSON.parse(readFileSync(path, "utf8")));
  if (process.env.SNOWKEY_REPORT) writeFileSync(process.env.SNOWKEY_REPORT, JSON.stringify({ checked, mismatches }, null, 1));
  assert.deepEqual(mismatches, [], `${mismatches.length} vectors differ`);
});
