// Type-level tests, checked by `npm run check` (tsc, no output): the
// validators are Standard Schemas by the standard's own published types,
// and the Snowflake brand keeps unchecked strings out.
import type { StandardJSONSchemaV1, StandardSchemaV1 } from "@standard-schema/spec";

import { bigintIDSchema, isSnowflake, parseJSON, type Snowflake, snowflakeSchema, sortIDs, toSnowflake } from "../src/index.js";

const asStandard: StandardSchemaV1<string, Snowflake> = snowflakeSchema;
const asJSONSchema: StandardJSONSchemaV1<string, Snowflake> = snowflakeSchema;
const asBigint: StandardSchemaV1<string, bigint> = bigintIDSchema;
type Out = StandardSchemaV1.InferOutput<typeof snowflakeSchema>;
const out: Out = toSnowflake("1");

// @ts-expect-error a plain string is not a checked Snowflake
const unchecked: Snowflake = "123";

declare const input: unknown;
if (isSnowflake(input)) {
  const checked: Snowflake = input;
  void checked;
}
const sorted: Snowflake[] = sortIDs([toSnowflake("2"), toSnowflake("1")]);
const post = parseJSON<{ id: Snowflake }>('{"id":"1"}');
const id: Snowflake = post.id;

void [asStandard, asJSONSchema, asBigint, out, unchecked, sorted, id];
