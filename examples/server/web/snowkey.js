// The snowkey package (js/ in the snowkey repository, MIT License), built
// by `npm run page` from js/src: do not edit, run it again.

// dist/id.js
var MAX_ID = 0x7fffffffffffffffn;
var IDError = class extends Error {
  constructor(kind, input, detail, offset = -1) {
    const text = describe(input);
    super(`snowkey: ${text} is not an ID: ${detail}`);
    this.name = "IDError";
    this.kind = kind;
    this.input = text;
    this.detail = detail;
    this.offset = offset;
  }
};
function describe(v) {
  return typeof v === "string" ? JSON.stringify(v.length > 64 ? v.slice(0, 64) + "\u2026" : v) : typeof v === "bigint" ? v + "n" : String(v);
}
var digits = /^[0-9]+$/;
function junk(c) {
  return c === " " || c === "	" || c === "\n" || c === "\r" ? "space" : c === "+" || c === "-" ? "sign" : c === "." ? "fraction" : c === "e" || c === "E" ? "exponent" : "character";
}
function parseID(text) {
  if (typeof text !== "string")
    throw new IDError("type", text, `a ${typeof text}, not a string`);
  const n = text.length;
  if (n === 0)
    throw new IDError("empty", text, "empty");
  if (text[0] === "-" && n > 1 && digits.test(text.slice(1)))
    throw new IDError("negative", text, "negative");
  if (n > 1 && text[0] === "0" && text[1] >= "0" && text[1] <= "9") {
    throw new IDError("syntax", text, "leading zero at offset 0", 0);
  }
  for (let i = 0; i < n; i++) {
    const c = text[i];
    if (c < "0" || c > "9")
      throw new IDError("syntax", text, `${junk(c)} ${JSON.stringify(c)} at offset ${i}`, i);
  }
  const v = BigInt(text);
  if (v > MAX_ID)
    throw new IDError("range", text, "out of range (the largest ID is 9223372036854775807)");
  return v;
}
function checkBig(id) {
  if (typeof id !== "bigint")
    throw new IDError("type", id, `a ${typeof id}, not a bigint`);
  if (id < 0n)
    throw new IDError("negative", id, "negative");
  if (id > MAX_ID)
    throw new IDError("range", id, "out of range (the largest ID is 9223372036854775807)");
  return id;
}
function toBigInt(id) {
  return typeof id === "bigint" ? checkBig(id) : parseID(id);
}
function formatID(id) {
  return checkBig(id).toString();
}
function toSnowflake(id) {
  return typeof id === "bigint" ? formatID(id) : (parseID(id), id);
}
function isSnowflake(value) {
  return typeof value === "string" && /^(0|[1-9][0-9]{0,18})$/.test(value) && (value.length < 19 || value <= "9223372036854775807");
}
function compareIDs(a, b) {
  const x = toBigInt(a), y = toBigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
function sortIDs(ids, order = "asc") {
  const keyed = ids.map((id) => [toBigInt(id), id]);
  const sign = order === "desc" ? -1 : 1;
  keyed.sort((a, b) => a[0] < b[0] ? -sign : a[0] > b[0] ? sign : 0);
  return keyed.map((k) => k[1]);
}
function pick(ids, want) {
  let best, bestN = 0n;
  for (const id of ids) {
    const n = toBigInt(id);
    if (best === void 0 || (want < 0 ? n < bestN : n > bestN)) {
      best = id;
      bestN = n;
    }
  }
  return best;
}
function minID(ids) {
  return pick(ids, -1);
}
function maxID(ids) {
  return pick(ids, 1);
}

// dist/layout.js
var DEFAULT_LAYOUT = Object.freeze({ epoch: 1288834974657, workerBits: 10, sequenceBits: 12 });
var lastDate = 864e13;
var LayoutError = class extends Error {
  constructor(field, detail) {
    super(`snowkey: invalid layout: ${field} ${detail}`);
    this.name = "LayoutError";
    this.field = field;
  }
};
function timeBits(layout) {
  return 63 - layout.workerBits - layout.sequenceBits;
}
function width(field, v) {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 31) {
    throw new LayoutError(field, `${String(v)} is not a whole number from 0 to 31`);
  }
}
function checkLayout(layout) {
  const { epoch, workerBits, sequenceBits } = layout;
  width("workerBits", workerBits);
  width("sequenceBits", sequenceBits);
  const tb = timeBits(layout);
  if (tb < 20)
    throw new LayoutError("timeBits", `${tb} is fewer than 20 (workerBits ${workerBits} + sequenceBits ${sequenceBits})`);
  if (typeof epoch !== "number" || !Number.isInteger(epoch) || epoch < 0) {
    throw new LayoutError("epoch", `${String(epoch)} is not whole milliseconds since 1970`);
  }
  if (epoch > Date.now())
    throw new LayoutError("epoch", `${new Date(epoch).toISOString()} is in the future`);
  if (epoch + 2 ** tb - 1 > lastDate)
    throw new LayoutError("timeBits", `${tb} reach past the last time a Date holds`);
  return layout;
}
function layoutFromServer(json) {
  const o = json ?? {};
  const l = checkLayout({
    epoch: o["epoch_ms"],
    workerBits: o["worker_bits"],
    sequenceBits: o["sequence_bits"]
  });
  if ("time_bits" in o && o["time_bits"] !== timeBits(l)) {
    throw new LayoutError("timeBits", `${String(o["time_bits"])} is not 63 - worker_bits - sequence_bits`);
  }
  if ("epoch" in o && Date.parse(o["epoch"]) !== l.epoch) {
    throw new LayoutError("epoch", `${String(o["epoch"])} is not epoch_ms ${l.epoch}`);
  }
  return Object.freeze(l);
}
function decodeID(id, layout = DEFAULT_LAYOUT) {
  const n = toBigInt(id);
  checkLayout(layout);
  const s = BigInt(layout.sequenceBits), w = BigInt(layout.workerBits);
  const timestamp = Number(n >> w + s) + layout.epoch;
  return {
    time: new Date(timestamp),
    timestamp,
    worker: Number(n >> s & (1n << w) - 1n),
    sequence: Number(n & (1n << s) - 1n)
  };
}
function bound(time, layout, low) {
  checkLayout(layout);
  const ms = Math.floor(typeof time === "number" ? time : time.getTime());
  if (!Number.isFinite(ms))
    throw new RangeError(`snowkey: ${String(time)} is not a time`);
  const field = ms - layout.epoch;
  const s = BigInt(layout.sequenceBits), w = BigInt(layout.workerBits);
  if (field < 0)
    return "0";
  if (field > 2 ** timeBits(layout) - 1)
    return MAX_ID.toString();
  const rest = low ? 0n : (1n << w + s) - 1n;
  return (BigInt(field) << w + s | rest).toString();
}
function firstID(time, layout = DEFAULT_LAYOUT) {
  return bound(time, layout, true);
}
function lastID(time, layout = DEFAULT_LAYOUT) {
  return bound(time, layout, false);
}

// dist/json.js
var idKey = /^(id|.+_id|.+Id|.+ID)$/;
var listKey = /^(ids|.+_ids|.+Ids|.+IDs)$/;
function matcher(given, def) {
  if (typeof given === "function")
    return given;
  if (given) {
    const set = new Set(given);
    return (k) => set.has(k);
  }
  return (k) => def.test(k);
}
function readID(key, v, big, ctx) {
  if (typeof v === "string") {
    try {
      const n = parseID(v);
      return big ? n : v;
    } catch (e) {
      const err = e;
      throw new IDError(err.kind, v, `field ${JSON.stringify(key)}: ${err.detail}`, err.offset);
    }
  }
  if (typeof v === "number") {
    const text = ctx?.source ?? String(v);
    throw new IDError("number", text, `field ${JSON.stringify(key)} holds a JSON number, which JavaScript rounds past 2^53; send IDs as strings`);
  }
  throw wrongKind(key, v, "a string");
}
function wrongKind(key, v, want) {
  const kind = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  return new IDError("type", kind, `field ${JSON.stringify(key)} holds a JSON ${kind}, not ${want}`);
}
function idReviver(options = {}) {
  const isID = matcher(options.keys, idKey), isList = matcher(options.listKeys, listKey);
  const big = options.as === "bigint";
  return function(key, value, context) {
    if (value === null)
      return value;
    if (isID(key))
      return readID(key, value, big, context);
    if (isList(key)) {
      if (!Array.isArray(value))
        throw wrongKind(key, value, "an array of strings");
      return value.map((v, i) => readID(`${key}[${i}]`, v, big, void 0));
    }
    return value;
  };
}
function parseJSON(text, options) {
  return JSON.parse(text, idReviver(options));
}
function idReplacer(_key, value) {
  return typeof value === "bigint" ? formatID(value) : value;
}
function stringifyJSON(value, space) {
  return JSON.stringify(value, idReplacer, space);
}

// dist/schema.js
var idJSONSchema = Object.freeze({
  type: "string",
  pattern: "^(0|[1-9][0-9]{0,18})$",
  description: "A 64-bit snowflake ID as decimal digits, at most 9223372036854775807."
});
function schema(convert) {
  const json = () => ({ ...idJSONSchema });
  return Object.freeze({
    "~standard": Object.freeze({
      version: 1,
      vendor: "snowkey",
      validate(value) {
        try {
          if (typeof value === "number") {
            throw new IDError("number", value, "a number, which JavaScript rounds past 2^53; IDs are strings");
          }
          return { value: convert(parseID(value), value) };
        } catch (e) {
          return { issues: [{ message: e.message }] };
        }
      },
      jsonSchema: { input: json, output: json }
    })
  });
}
var snowflakeSchema = schema((_, text) => text);
var bigintIDSchema = schema((n) => n);
export {
  DEFAULT_LAYOUT,
  IDError,
  LayoutError,
  MAX_ID,
  bigintIDSchema,
  checkLayout,
  compareIDs,
  decodeID,
  firstID,
  formatID,
  idJSONSchema,
  idReplacer,
  idReviver,
  isSnowflake,
  lastID,
  layoutFromServer,
  maxID,
  minID,
  parseID,
  parseJSON,
  snowflakeSchema,
  sortIDs,
  stringifyJSON,
  timeBits,
  toBigInt,
  toSnowflake
};
