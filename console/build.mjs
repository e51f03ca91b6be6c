// Builds src/main.ts into ../control_plane/console/static/console.js: one ES2022 file, no
// source map, no dynamic names, so the same sources give the same bytes on every machine
// (tests/console/test_console_files.py rebuilds it and compares with the checked-in file).
// The receipt, proof and ZIP checks are the TypeScript SDK's own (sdks/typescript/src), bundled in.
// `node build.mjs --out <file>` writes elsewhere (the test's fresh build).
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf("--out");
const outfile = at > 0 ? process.argv[at + 1]
  : join(here, "..", "control_plane", "console", "static", "console.js");

await build({
  absWorkingDir: here,  // the bundle's path comments (src/…, ../sdks/typescript/src/…) from any cwd
  entryPoints: [join(here, "src", "main.ts")],
  outfile,
  bundle: true,
  format: "iife",
  target: "es2022",
  platform: "browser",
  minify: false,
  sourcemap: false,
  legalComments: "none",
  charset: "utf8",
  banner: { js: "// memplane compliance console: built from console/src by console/build.mjs; do not edit." },
  logLevel: "warning",
});
