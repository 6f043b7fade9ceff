// Measures what a client pays for the package: each entry bundled and
// minified by esbuild, then gzipped at level 9 (as a CDN serves it).
//
//   node scripts/size.mjs        prints the table
//
// The core is parsing, formatting, comparing and decoding; the rest (JSON
// helpers, Standard Schema validators) is tree-shaken away when unused.
import { build } from "esbuild";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";

const dist = fileURLToPath(new URL("../dist/index.js", import.meta.url));

export const entries = {
  core: ["parseID", "formatID", "isSnowflake", "toSnowflake", "toBigInt", "compareIDs", "sortIDs", "minID", "maxID",
    "IDError", "MAX_ID", "decodeID", "firstID", "lastID", "checkLayout", "layoutFromServer", "timeBits", "LayoutError",
    "DEFAULT_LAYOUT"],
  json: ["parseJSON", "stringifyJSON", "idReviver", "idReplacer"],
  schema: ["snowflakeSchema", "bigintIDSchema", "idJSONSchema"],
  all: ["*"],
};

// sizeOf bundles the named exports of the package and returns the
// minified and the gzipped size in bytes.
export async function sizeOf(names) {
  const contents = names[0] === "*"
    ? `export * from ${JSON.stringify(dist)};`
    : `export { ${names.join(", ")} } from ${JSON.stringify(dist)};`;
  const res = await build({
    stdin: { contents, resolveDir: process.cwd(), loader: "js" },
    bundle: true, minify: true, format: "esm", platform: "neutral", target: "es2020", write: false, legalComments: "none",
  });
  const code = res.outputFiles[0].contents;
  return { min: code.length, gzip: gzipSync(code, { level: 9 }).length };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log("entry\tminified\tmin+gzip (bytes)");
  for (const [name, names] of Object.entries(entries)) {
    const s = await sizeOf(names);
    console.log(`${name}\t${s.min}\t${s.gzip}`);
  }
}
