import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { checkLayout, decodeID, DEFAULT_LAYOUT, firstID, IDError, lastID, LayoutError, layoutFromServer, MAX_ID, timeBits } from "../dist/index.js";

describe("decodeID", () => {
  it("takes an ID of the default layout apart", () => {
    // Worker 7, sequence 5, at 2026-11-24T01:13:29.633Z.
    const ms = Date.UTC(2026, 10, 24, 1, 13, 29, 633);
    const id = ((BigInt(ms - DEFAULT_LAYOUT.epoch) << 22n) | (7n << 12n) | 5n).toString();
    const p = decodeID(id);
    assert.equal(p.time.toISOString(), "2026-11-24T01:13:29.633Z");
    assert.equal(p.timestamp, ms);
    assert.equal(p.worker, 7);
    assert.equal(p.sequence, 5);
    assert.deepEqual(decodeID(BigInt(id)), p);
  });
  it("uses the layout it is given", () => {
    const l = { epoch: Date.UTC(2020, 0, 1), workerBits: 5, sequenceBits: 13 };
    const p = decodeID(MAX_ID, l);
    assert.equal(p.worker, 31);
    assert.equal(p.sequence, 8191);
    assert.equal(p.timestamp, l.epoch + 2 ** 45 - 1);
  });
  it("refuses what is not an ID", () => {
    assert.throws(() => decodeID("-1"), IDError);
    assert.throws(() => decodeID(7), IDError);
  });
});

describe("layouts", () => {
  it("checkLayout refuses what Go's Validate refuses, naming the field", () => {
    const e = DEFAULT_LAYOUT.epoch;
    for (const [l, field] of [
      [{ epoch: e, workerBits: 32, sequenceBits: 0 }, "workerBits"],
      [{ epoch: e, workerBits: 0, sequenceBits: 32 }, "sequenceBits"],
      [{ epoch: e, workerBits: 1.5, sequenceBits: 12 }, "workerBits"],
      [{ epoch: e, workerBits: 31, sequenceBits: 13 }, "timeBits"],
      [{ epoch: -1, workerBits: 10, sequenceBits: 12 }, "epoch"],
      [{ epoch: 0.5, workerBits: 10, sequenceBits: 12 }, "epoch"],
      [{ epoch: Date.now() + 3600_000, workerBits: 10, sequenceBits: 12 }, "epoch"],
      [{ workerBits: 10, sequenceBits: 12 }, "epoch"],
      // 53 time bits reach past the last Date.
      [{ epoch: 0, workerBits: 5, sequenceBits: 5 }, "timeBits"],
    ]) {
      assert.throws(() => checkLayout(l), (err) => err instanceof LayoutError && err.field === field, JSON.stringify(l));
      assert.throws(() => decodeID("1", l), LayoutError);
    }
    assert.equal(checkLayout({ epoch: 0, workerBits: 5, sequenceBits: 6 }).epoch, 0);
    assert.equal(checkLayout({ epoch: e, workerBits: 31, sequenceBits: 12 }).workerBits, 31);
    assert.equal(timeBits(DEFAULT_LAYOUT), 41);
  });
  it("layoutFromServer reads GET /api/layout and checks it whole", () => {
    const answer = { epoch: "2020-01-01T00:00:00Z", epoch_ms: 1577836800000, time_bits: 45, worker_bits: 5, sequence_bits: 13 };
    assert.deepEqual({ ...layoutFromServer(answer) }, { epoch: 1577836800000, workerBits: 5, sequenceBits: 13 });
    assert.throws(() => layoutFromServer({ ...answer, time_bits: 41 }), { field: "timeBits" });
    assert.throws(() => layoutFromServer({ ...answer, epoch: "2010-11-04T01:42:54.657Z" }), { field: "epoch" });
    assert.throws(() => layoutFromServer({ ...answer, epoch_ms: "1577836800000" }), { field: "epoch" });
    assert.throws(() => layoutFromServer(null), LayoutError);
  });
});

describe("firstID and lastID", () => {
  const t = new Date("2026-01-01T00:00:00Z");
  it("bound every ID of a millisecond", () => {
    const first = BigInt(firstID(t)), last = BigInt(lastID(t));
    assert.equal(last - first, (1n << 22n) - 1n);
    assert.equal(decodeID(firstID(t)).timestamp, t.getTime());
    assert.equal(decodeID(lastID(t)).timestamp, t.getTime());
    assert.equal(firstID(t.getTime() + 0.9), firstID(t), "a fraction of a millisecond is the millisecond");
    assert.equal(BigInt(firstID(t.getTime() + 1)), last + 1n);
  });
  it("clamp outside the layout", () => {
    assert.equal(firstID(0), "0");
    assert.equal(lastID(DEFAULT_LAYOUT.epoch - 1), "0");
    assert.equal(firstID(8.64e15), MAX_ID.toString());
  });
  it("refuse a time that is not one", () => {
    assert.throws(() => firstID(new Date(NaN)), RangeError);
    assert.throws(() => lastID(NaN), RangeError);
  });
});
