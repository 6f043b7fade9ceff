// Bundles the package into the one ES module that the example server's
// page serves (examples/server/web/snowkey.js), unminified so that it can
// be read in the browser.
//
//   node scripts/page.mjs [OUT]   (default build/snowkey.js)
//
// `npm run build` writes build/snowkey.js; `npm run page` writes the
// page's copy, which the conformance test (conformance_test.go) compares
// with what the build produces.
import { build } from "esbuild";

export const banner =
  "// The snowkey package (js/ in the snowkey repository, MIT License), built\n" +
  "// by `npm run page` from js/src: do not edit, run it again.";

const out = process.argv[2] ?? "build/snowkey.js";
await build({
  entryPoints: ["dist/index.js"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2020",
  banner: { js: banner },
  legalComments: "none",
  outfile: out,
  logLevel: "warning",
});
