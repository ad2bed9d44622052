import { fileURLToPath } from "node:url";

// test/hosts holds the node_modules this app resolves from (its own package, apart from the
// repository's root): tell Next.js so, instead of letting it guess from the lockfiles above.
const hosts = fileURLToPath(new URL("..", import.meta.url));

/** @type {import("next").NextConfig} */
export default {
  turbopack: { root: hosts },
  outputFileTracingRoot: hosts,
  // hosts.test.ts type-checks every app in one tsc run; Next.js need not do it again.
  typescript: { ignoreBuildErrors: true },
};
