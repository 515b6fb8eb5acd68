// Bundles src/main.ts into dist/app.js (esbuild) beside the static files; `node build.mjs`.
// The code under src/gen is generated from protos/ by `make web` first.
import { build } from "esbuild";
import { cpSync, mkdirSync, rmSync } from "node:fs";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist");
cpSync("static", "dist", { recursive: true });
await build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2022"],
  outfile: "dist/app.js",
  sourcemap: false,
  legalComments: "none",
  logLevel: "warning",
});
