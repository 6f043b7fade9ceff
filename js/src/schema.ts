// Validators in the Standard Schema form (standardschema.dev, version 1),
// so that form and API libraries that take a Zod, Valibot or ArkType
// schema take these too. The interfaces are written out here, as the
// standard asks of a library that has no dependency on it.

import { IDError, type Snowflake, parseID } from "./id.js";

/** The Standard Schema interface, version 1. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

export declare namespace StandardSchemaV1 {
  /** What a schema declares: the standard's version, its vendor, its validate function and its types. */
  export interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown, options?: Options | undefined) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  /** Options a caller may pass to validate; these schemas take none. */
  export interface Options {
    readonly libraryOptions?: Record<string, unknown> | undefined;
  }
  export type Result<Output> = SuccessResult<Output> | FailureResult;
  export interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  export interface FailureResult {
    readonly issues: ReadonlyArray<Issue>;
  }
  export interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }
  export interface PathSegment {
    readonly key: PropertyKey;
  }
  export interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
}

/** The Standard JSON Schema interface, version 1: a schema that can describe itself as JSON Schema. */
export interface StandardJSONSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardJSONSchemaV1.Props<Input, Output>;
}

export declare namespace StandardJSONSchemaV1 {
  export interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly types?: StandardSchemaV1.Types<Input, Output> | undefined;
    readonly jsonSchema: Converter;
  }
  export interface Converter {
    readonly input: (options: Options) => Record<string, unknown>;
    readonly output: (options: Options) => Record<string, unknown>;
  }
  export interface Options {
    readonly target: string;
    readonly libraryOptions?: Record<string, unknown> | undefined;
  }
}

/** A schema that validates an ID's text and gives `Output`; it also describes itself as JSON Schema. */
export type IDSchema<Output> = StandardSchemaV1<string, Output> & StandardJSONSchemaV1<string, Output>;

/**
 * The JSON Schema of an ID on the wire: a string of decimal digits, as
 * the Go side's OpenAPI schemas describe it (the pattern checks the
 * spelling; the value is at most 9223372036854775807).
 */
export const idJSONSchema = Object.freeze({
  type: "string",
  pattern: "^(0|[1-9][0-9]{0,18})$",
  description: "A 64-bit snowflake ID as decimal digits, at most 9223372036854775807.",
});

function schema<Output>(convert: (n: bigint, text: string) => Output): IDSchema<Output> {
  const json = () => ({ ...idJSONSchema });
  return Object.freeze({
    "~standard": Object.freeze({
      version: 1 as const,
      vendor: "snowkey",
      validate(value: unknown): StandardSchemaV1.Result<Output> {
        try {
          if (typeof value === "number") {
            throw new IDError("number", value, "a number, which JavaScript rounds past 2^53; IDs are strings");
          }
          return { value: convert(parseID(value as string), value as string) };
        } catch (e) {
          return { issues: [{ message: (e as IDError).message }] };
        }
      },
      jsonSchema: { input: json, output: json },
    }),
  });
}

/** Validates an ID's text and gives it as a {@link Snowflake}; issues name what is wrong, as {@link parseID}'s errors do. */
export const snowflakeSchema: IDSchema<Snowflake> = schema((_, text) => text as Snowflake);

/** Validates an ID's text and gives it as a bigint. */
export const bigintIDSchema: IDSchema<bigint> = schema((n) => n);
