// snowkey: exact 64-bit Snowflake IDs in JavaScript, the client side of
// the snowkey Go library. No dependencies; ES modules for browsers,
// Node.js, Deno and Bun.

export {
  compareIDs,
  formatID,
  IDError,
  type IDErrorKind,
  type IDLike,
  isSnowflake,
  MAX_ID,
  maxID,
  minID,
  parseID,
  type Snowflake,
  sortIDs,
  toBigInt,
  toSnowflake,
} from "./id.js";
export {
  checkLayout,
  decodeID,
  DEFAULT_LAYOUT,
  firstID,
  lastID,
  type Layout,
  LayoutError,
  layoutFromServer,
  type Parts,
  timeBits,
} from "./layout.js";
export { idReplacer, idReviver, type IDJSONOptions, parseJSON, stringifyJSON } from "./json.js";
export {
  bigintIDSchema,
  idJSONSchema,
  type IDSchema,
  snowflakeSchema,
  type StandardJSONSchemaV1,
  type StandardSchemaV1,
} from "./schema.js";
