// Layouts: how the 63 bits of an ID split into time, worker and sequence,
// and where time starts, as the Go side's idtype.Layout has them:
//
//    63   62 ........... S+W   S+W-1 ..... S   S-1 ...... 0
//   +---+------------------+---------------+--------------+
//   | 0 | ms since epoch   | worker        | sequence     |
//   +---+------------------+---------------+--------------+
//        timeBits = 63 - W - S

import { type IDLike, MAX_ID, type Snowflake, toBigInt } from "./id.js";

/** A bit layout, as idtype.Layout has it. Build one with {@link checkLayout} or {@link layoutFromServer}. */
export interface Layout {
  /** Time zero of the layout, in milliseconds since 1970-01-01T00:00:00Z. */
  readonly epoch: number;
  /** Width of the worker number, 0 to 31. */
  readonly workerBits: number;
  /** Width of the per-millisecond sequence, 0 to 31. */
  readonly sequenceBits: number;
}

/** The Go side's idtype.DefaultLayout: Twitter's epoch (2010-11-04T01:42:54.657Z), 41 time, 10 worker and 12 sequence bits. */
export const DEFAULT_LAYOUT: Layout = Object.freeze({ epoch: 1288834974657, workerBits: 10, sequenceBits: 12 });

/** The last millisecond a Date holds (year 275760). */
const lastDate = 8.64e15;

/** A layout that cannot work; the message names the field. */
export class LayoutError extends Error {
  /** The field at fault: `epoch`, `workerBits`, `sequenceBits` or `timeBits`. */
  readonly field: string;

  constructor(field: string, detail: string) {
    super(`snowkey: invalid layout: ${field} ${detail}`);
    this.name = "LayoutError";
    this.field = field;
  }
}

/** The width of the time field, 63 - workerBits - sequenceBits. */
export function timeBits(layout: Layout): number {
  return 63 - layout.workerBits - layout.sequenceBits;
}

function width(field: string, v: unknown): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 31) {
    throw new LayoutError(field, `${String(v)} is not a whole number from 0 to 31`);
  }
}

/**
 * Checks a layout by the Go side's rules (Layout.Validate) and returns
 * it: widths of 0 to 31 bits that leave at least 20 time bits, an epoch
 * of whole milliseconds, not before 1970 and not in the future. One rule
 * is this side's own: the layout's last time must fit a Date (year
 * 275760), which leaves out layouts of 53 or more time bits (worker and
 * sequence bits adding up to 10 or fewer). Throws {@link LayoutError}.
 */
export function checkLayout(layout: Layout): Layout {
  const { epoch, workerBits, sequenceBits } = layout;
  width("workerBits", workerBits);
  width("sequenceBits", sequenceBits);
  const tb = timeBits(layout);
  if (tb < 20) throw new LayoutError("timeBits", `${tb} is fewer than 20 (workerBits ${workerBits} + sequenceBits ${sequenceBits})`);
  if (typeof epoch !== "number" || !Number.isInteger(epoch) || epoch < 0) {
    throw new LayoutError("epoch", `${String(epoch)} is not whole milliseconds since 1970`);
  }
  if (epoch > Date.now()) throw new LayoutError("epoch", `${new Date(epoch).toISOString()} is in the future`);
  if (epoch + 2 ** tb - 1 > lastDate) throw new LayoutError("timeBits", `${tb} reach past the last time a Date holds`);
  return layout;
}

/**
 * Reads the layout a server reports, as the example's `GET /api/layout`
 * sends it: `{"epoch_ms": 1288834974657, "worker_bits": 10,
 * "sequence_bits": 12}`, with `time_bits` and `epoch` (RFC 3339) checked
 * against the rest when present. Throws {@link LayoutError}.
 */
export function layoutFromServer(json: unknown): Layout {
  const o = (json ?? {}) as Record<string, unknown>;
  const l = checkLayout({
    epoch: o["epoch_ms"] as number,
    workerBits: o["worker_bits"] as number,
    sequenceBits: o["sequence_bits"] as number,
  });
  if ("time_bits" in o && o["time_bits"] !== timeBits(l)) {
    throw new LayoutError("timeBits", `${String(o["time_bits"])} is not 63 - worker_bits - sequence_bits`);
  }
  if ("epoch" in o && Date.parse(o["epoch"] as string) !== l.epoch) {
    throw new LayoutError("epoch", `${String(o["epoch"])} is not epoch_ms ${l.epoch}`);
  }
  return Object.freeze(l);
}

/** An ID taken apart by {@link decodeID}. */
export interface Parts {
  /** When the ID was issued, to the millisecond. */
  readonly time: Date;
  /** The same time in milliseconds since 1970, exact. */
  readonly timestamp: number;
  /** The worker number that issued it. */
  readonly worker: number;
  /** Its place among the IDs of that worker and millisecond. */
  readonly sequence: number;
}

/**
 * Takes an ID apart with a layout (by default the Go side's default):
 * the time, the worker and the sequence, exactly as the Go side's
 * Layout.Decode does. Throws {@link IDError} for a value that is not an
 * ID and {@link LayoutError} for a layout that cannot work.
 */
export function decodeID(id: IDLike, layout: Layout = DEFAULT_LAYOUT): Parts {
  const n = toBigInt(id);
  checkLayout(layout);
  const s = BigInt(layout.sequenceBits), w = BigInt(layout.workerBits);
  const timestamp = Number(n >> (w + s)) + layout.epoch;
  return {
    time: new Date(timestamp),
    timestamp,
    worker: Number((n >> s) & ((1n << w) - 1n)),
    sequence: Number(n & ((1n << s) - 1n)),
  };
}

function bound(time: Date | number, layout: Layout, low: boolean): Snowflake {
  checkLayout(layout);
  const ms = Math.floor(typeof time === "number" ? time : time.getTime());
  if (!Number.isFinite(ms)) throw new RangeError(`snowkey: ${String(time)} is not a time`);
  const field = ms - layout.epoch;
  const s = BigInt(layout.sequenceBits), w = BigInt(layout.workerBits);
  if (field < 0) return "0" as Snowflake;
  if (field > 2 ** timeBits(layout) - 1) return MAX_ID.toString() as Snowflake;
  const rest = low ? 0n : (1n << (w + s)) - 1n;
  return ((BigInt(field) << (w + s)) | rest).toString() as Snowflake;
}

/**
 * The smallest ID any worker can issue in the millisecond of `time` (a
 * Date, or milliseconds since 1970), for time ranges and cursors on the
 * key alone: `id >= firstID(from) && id < firstID(to)`. Times before the
 * epoch give "0", times past the layout's last give the largest ID, as the
 * Go side's Layout.FirstID does.
 */
export function firstID(time: Date | number, layout: Layout = DEFAULT_LAYOUT): Snowflake {
  return bound(time, layout, true);
}

/**
 * The largest ID any worker can issue in the millisecond of `time`, for
 * inclusive upper bounds (`id <= lastID(to)`); clamped as {@link firstID}.
 */
export function lastID(time: Date | number, layout: Layout = DEFAULT_LAYOUT): Snowflake {
  return bound(time, layout, false);
}
