// The ID itself: its one spelling, parsing, formatting and order.
//
// A snowflake is a 63-bit integer (the sign bit is always 0). A JavaScript
// number holds integers exactly only up to 2^53, and every snowflake issued
// after the first hours of the default epoch is above that, so an ID is
// either a string (on the wire, in the DOM, as a map key) or a bigint (for
// arithmetic), never a number.

declare const brand: unique symbol;

/**
 * An ID in its one spelling: decimal digits, no sign, no leading zeros,
 * at most 9223372036854775807. Only {@link isSnowflake},
 * {@link toSnowflake}, {@link formatID} and the JSON and schema helpers
 * make one, so a value of this type has been checked.
 */
export type Snowflake = string & { readonly [brand]: "snowkey.Snowflake" };

/** Anything this package reads as an ID: its text or a bigint. */
export type IDLike = Snowflake | string | bigint;

/** The largest ID, 2^63-1. */
export const MAX_ID = 0x7fffffffffffffffn;

/**
 * What is wrong with a value that should be an ID:
 * - `empty`: an empty string;
 * - `syntax`: not plain decimal digits (a space, a sign, a fraction, an
 *   exponent, a leading zero, another character);
 * - `negative`: a negative number (a snowflake never is);
 * - `range`: larger than 2^63-1;
 * - `type`: not a string (or, for bigints, not a bigint), or a JSON value
 *   of the wrong kind;
 * - `number`: a JSON number where an ID belongs: a number past 2^53 has
 *   already been rounded by the time JavaScript sees it.
 */
export type IDErrorKind = "empty" | "syntax" | "negative" | "range" | "type" | "number";

/** The error of every function here that is given something that is not an ID. */
export class IDError extends Error {
  /** What is wrong, for code to branch on. */
  readonly kind: IDErrorKind;
  /** The value, as text (cut to 64 characters). */
  readonly input: string;
  /** What is wrong, in words, without the input. */
  readonly detail: string;
  /** Where a `syntax` error was found, in UTF-16 code units; else -1. */
  readonly offset: number;

  constructor(kind: IDErrorKind, input: unknown, detail: string, offset = -1) {
    const text = describe(input);
    super(`snowkey: ${text} is not an ID: ${detail}`);
    this.name = "IDError";
    this.kind = kind;
    this.input = text;
    this.detail = detail;
    this.offset = offset;
  }
}

function describe(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v.length > 64 ? v.slice(0, 64) + "…" : v) : typeof v === "bigint" ? v + "n" : String(v);
}

const digits = /^[0-9]+$/;

function junk(c: string): string {
  return c === " " || c === "\t" || c === "\n" || c === "\r" ? "space"
    : c === "+" || c === "-" ? "sign"
    : c === "." ? "fraction"
    : c === "e" || c === "E" ? "exponent"
    : "character";
}

/**
 * Reads an ID's text exactly, as a bigint. It accepts the one spelling
 * that the Go side writes and reads (decimal digits, no sign, no leading
 * zeros, at most 2^63-1) and throws an {@link IDError} naming what is
 * wrong with anything else: `"007"` is a `syntax` error ("leading zero"),
 * `"-1"` a `negative` one, `"9223372036854775808"` out of `range`.
 */
export function parseID(text: string): bigint {
  if (typeof text !== "string") throw new IDError("type", text, `a ${typeof text}, not a string`);
  const n = text.length;
  if (n === 0) throw new IDError("empty", text, "empty");
  if (text[0] === "-" && n > 1 && digits.test(text.slice(1))) throw new IDError("negative", text, "negative");
  if (n > 1 && text[0] === "0" && text[1]! >= "0" && text[1]! <= "9") {
    throw new IDError("syntax", text, "leading zero at offset 0", 0);
  }
  for (let i = 0; i < n; i++) {
    const c = text[i]!;
    if (c < "0" || c > "9") throw new IDError("syntax", text, `${junk(c)} ${JSON.stringify(c)} at offset ${i}`, i);
  }
  const v = BigInt(text);
  if (v > MAX_ID) throw new IDError("range", text, "out of range (the largest ID is 9223372036854775807)");
  return v;
}

/** Checks a bigint is an ID (0 to 2^63-1) and returns it. */
function checkBig(id: bigint): bigint {
  if (typeof id !== "bigint") throw new IDError("type", id, `a ${typeof id}, not a bigint`);
  if (id < 0n) throw new IDError("negative", id, "negative");
  if (id > MAX_ID) throw new IDError("range", id, "out of range (the largest ID is 9223372036854775807)");
  return id;
}

/** Reads an ID given as text or as a bigint; throws {@link IDError}. */
export function toBigInt(id: IDLike): bigint {
  return typeof id === "bigint" ? checkBig(id) : parseID(id);
}

/** Writes an ID (a bigint from 0 to 2^63-1) in its one spelling; throws {@link IDError} for any other value. */
export function formatID(id: bigint): Snowflake {
  return checkBig(id).toString() as Snowflake;
}

/**
 * Checks an ID given as text or as a bigint and returns its one spelling;
 * throws {@link IDError}. Text is returned as it came, since only the one
 * spelling passes.
 */
export function toSnowflake(id: IDLike): Snowflake {
  return typeof id === "bigint" ? formatID(id) : (parseID(id), id as Snowflake);
}

/** Reports whether a value is an ID's text in its one spelling, and narrows its type. */
export function isSnowflake(value: unknown): value is Snowflake {
  return typeof value === "string" && /^(0|[1-9][0-9]{0,18})$/.test(value) &&
    (value.length < 19 || value <= "9223372036854775807");
}

/**
 * Compares two IDs by their numbers, not their text ("999" comes before
 * "1000"): -1, 0 or 1, so `ids.sort(compareIDs)` sorts oldest first.
 * Throws {@link IDError} if either is not an ID.
 */
export function compareIDs(a: IDLike, b: IDLike): -1 | 0 | 1 {
  const x = toBigInt(a), y = toBigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Returns a sorted copy of `ids`, oldest first (`"asc"`, the default) or
 * newest first (`"desc"`); each element keeps its type. Throws
 * {@link IDError} if an element is not an ID.
 */
export function sortIDs<T extends IDLike>(ids: readonly T[], order: "asc" | "desc" = "asc"): T[] {
  const keyed = ids.map((id) => [toBigInt(id), id] as const);
  const sign = order === "desc" ? -1 : 1;
  keyed.sort((a, b) => (a[0] < b[0] ? -sign : a[0] > b[0] ? sign : 0));
  return keyed.map((k) => k[1]);
}

function pick<T extends IDLike>(ids: readonly T[], want: -1 | 1): T | undefined {
  let best: T | undefined, bestN = 0n;
  for (const id of ids) {
    const n = toBigInt(id);
    if (best === undefined || (want < 0 ? n < bestN : n > bestN)) {
      best = id;
      bestN = n;
    }
  }
  return best;
}

/** The smallest (oldest) of `ids`, or undefined for none. Throws {@link IDError} if an element is not an ID. */
export function minID<T extends IDLike>(ids: readonly T[]): T | undefined {
  return pick(ids, -1);
}

/** The largest (newest) of `ids`, or undefined for none. Throws {@link IDError} if an element is not an ID. */
export function maxID<T extends IDLike>(ids: readonly T[]): T | undefined {
  return pick(ids, 1);
}
