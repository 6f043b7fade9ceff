// The size a page pays for the package, measured as scripts/size.mjs
// measures it (esbuild, minified, gzip -9). The core (parse, format,
// compare, decode) is to stay within 2 KB.
import assert from "node:assert/strict";
import { it } from "node:test";

import { entries, sizeOf } from "../scripts/size.mjs";

it("the core is at most 2 KB minified and gzipped", async (t) => {
  const core = await sizeOf(entries.core);
  const all = await sizeOf(entries.all);
  t.diagnostic(`core: ${core.min} B minified, ${core.gzip} B gzipped; everything: ${all.min} B, ${all.gzip} B`);
  assert.ok(core.gzip <= 2048, `the core is ${core.gzip} B gzipped`);
  assert.ok(core.gzip < all.gzip, "the core bundle holds everything: tree shaking did not happen");
});
