// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with its type declarations.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(join(pkg, "dist"), { recursive: true, force: true });
for (const config of ["tsconfig.json", "tsconfig.cjs.json"]) {
  execFileSync(process.execPath, [tsc, "-p", config], { cwd: pkg, stdio: "inherit" });
}
mkdirSync(join(pkg, "dist", "cjs"), { recursive: true });
writeFileSync(join(pkg, "dist", "cjs", "package.json"), '{"type": "commonjs"}\n');
writeFileSync(join(pkg, "dist", "esm", "package.json"), '{"type": "module"}\n');
