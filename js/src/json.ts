// JSON that keeps every ID exact. The Go side writes each ID as a JSON
// string ("1541815603606036480"); JSON.parse would turn a bare number into
// a double and round it past 2^53 before any code could look, so a number
// where an ID belongs is refused, never read.

import { IDError, formatID, parseID } from "./id.js";

/** Which keys hold IDs and lists of IDs, and what an ID becomes. */
export interface IDJSONOptions {
  /**
   * The keys whose values are IDs (or null): a list of names, or a test.
   * Default: `id` and names ending in `_id`, `Id` or `ID`.
   */
  readonly keys?: readonly string[] | ((key: string) => boolean);
  /**
   * The keys whose values are lists of IDs (or null): a list of names, or
   * a test. Default: `ids` and names ending in `_ids`, `Ids` or `IDs`.
   */
  readonly listKeys?: readonly string[] | ((key: string) => boolean);
  /** `"string"` (the default) keeps each ID as its checked text (a Snowflake); `"bigint"` parses it. */
  readonly as?: "string" | "bigint";
}

const idKey = /^(id|.+_id|.+Id|.+ID)$/;
const listKey = /^(ids|.+_ids|.+Ids|.+IDs)$/;

function matcher(given: readonly string[] | ((key: string) => boolean) | undefined, def: RegExp): (key: string) => boolean {
  if (typeof given === "function") return given;
  if (given) {
    const set = new Set(given);
    return (k) => set.has(k);
  }
  return (k) => def.test(k);
}

/** JSON.parse's third argument where the engine has it: the number's own text. */
interface ReviverContext {
  readonly source?: string;
}

function readID(key: string, v: unknown, big: boolean, ctx: ReviverContext | undefined): unknown {
  if (typeof v === "string") {
    try {
      const n = parseID(v);
      return big ? n : v;
    } catch (e) {
      const err = e as IDError;
      throw new IDError(err.kind, v, `field ${JSON.stringify(key)}: ${err.detail}`, err.offset);
    }
  }
  if (typeof v === "number") {
    const text = ctx?.source ?? String(v);
    throw new IDError("number", text,
      `field ${JSON.stringify(key)} holds a JSON number, which JavaScript rounds past 2^53; send IDs as strings`);
  }
  throw wrongKind(key, v, "a string");
}

function wrongKind(key: string, v: unknown, want: string): IDError {
  const kind = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  return new IDError("type", kind, `field ${JSON.stringify(key)} holds a JSON ${kind}, not ${want}`);
}

/**
 * A JSON.parse reviver that checks every ID field: an ID arrives as its
 * string and stays one (or becomes a bigint with `as: "bigint"`); null
 * stays null in an ID field and a list field; anything else, and above all
 * a JSON number, throws an {@link IDError} naming the field, and the parse
 * fails.
 */
export function idReviver(options: IDJSONOptions = {}): (this: unknown, key: string, value: unknown, context?: ReviverContext) => unknown {
  const isID = matcher(options.keys, idKey), isList = matcher(options.listKeys, listKey);
  const big = options.as === "bigint";
  return function (key, value, context) {
    if (value === null) return value;
    if (isID(key)) return readID(key, value, big, context);
    if (isList(key)) {
      if (!Array.isArray(value)) throw wrongKind(key, value, "an array of strings");
      return value.map((v, i) => readID(`${key}[${i}]`, v, big, undefined));
    }
    return value;
  };
}

/** JSON.parse with {@link idReviver}: every ID field exact, or an {@link IDError}. */
export function parseJSON<T = unknown>(text: string, options?: IDJSONOptions): T {
  return JSON.parse(text, idReviver(options) as (this: unknown, key: string, value: unknown) => unknown) as T;
}

/** A JSON.stringify replacer that writes every bigint as an ID string (and throws {@link IDError} for a bigint that is no ID). */
export function idReplacer(this: unknown, _key: string, value: unknown): unknown {
  return typeof value === "bigint" ? formatID(value) : value;
}

/** JSON.stringify with {@link idReplacer}: bigint IDs become strings, as the Go side reads them. */
export function stringifyJSON(value: unknown, space?: string | number): string {
  return JSON.stringify(value, idReplacer, space);
}
