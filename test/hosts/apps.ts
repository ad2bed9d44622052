import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { startRedis, stopRedis } from "../support/redis-server.js";
import { hostBin, hostEnv, hosts, nodeFor, type Running, root, rootBin, run, serve } from "./serve.js";

// How each app under test/hosts/ is built and served, the way its framework or platform does it
// in production. One driver per app; hosts.json's rows name the app and the route they use.

/** What a driver gets: a free loopback port, the endpoint secret, and the app's directory. */
export interface AppContext {
  port: number;
  secret: string;
  dir: string;
}

/** A served app: its URLs, what it printed, how long its steps took. */
export interface Served extends Running {
  url(path: string): string;
  /** Milliseconds of each step (build, start). */
  timings: Record<string, number>;
}

/** Times `step` into `timings[name]`. */
async function timed<T>(timings: Record<string, number>, name: string, step: () => Promise<T>): Promise<T> {
  const began = performance.now();
  try {
    return await step();
  } finally {
    timings[name] = Math.round(performance.now() - began);
  }
}

function served(running: Running, port: number, timings: Record<string, number>): Served {
  return { ...running, url: (path) => `http://127.0.0.1:${port}${path}`, timings };
}

/** tsx's loader, from the repository's devDependencies, for apps run from TypeScript sources on Node 20. */
const TSX = pathToFileURL(join(root, "node_modules/tsx/dist/esm/index.mjs")).href;

export const apps: Record<string, (context: AppContext) => Promise<Served>> = {
  // Next.js: `next build`, then `next start`, as deployed on a server of one's own. The build
  // runs without the secret, as a CI build does.
  async next({ port, secret, dir }) {
    const timings: Record<string, number> = {};
    await timed(timings, "build", () => run("next build", process.execPath, [hostBin("next"), "build"], dir));
    const running = await timed(timings, "start", () =>
      serve(
        "next start",
        process.execPath,
        [hostBin("next"), "start", "--port", String(port), "--hostname", "127.0.0.1"],
        dir,
        hostEnv({ WEBHOOK_SECRET: secret }),
        port,
      ),
    );
    return served(running, port, timings);
  },

  // Nitro 2, the server engine of Nuxt 3 and 4, on h3 v1: `nitropack build` with its default
  // node-server preset, then its output run as deployed.
  async nitro({ port, secret, dir }) {
    const timings: Record<string, number> = {};
    await timed(timings, "build", () => run("nitropack build", process.execPath, [hostBin("nitropack"), "build"], dir));
    const running = await timed(timings, "start", () =>
      serve(
        "the Nitro server",
        process.execPath,
        [".output/server/index.mjs"],
        dir,
        hostEnv({ WEBHOOK_SECRET: secret, PORT: String(port), HOST: "127.0.0.1" }),
        port,
      ),
    );
    return served(running, port, timings);
  },

  // h3 v2 with its own serve(), the TypeScript run by tsx (Node 20 has no type stripping).
  async "h3-v2"({ port, secret, dir }) {
    const timings: Record<string, number> = {};
    const running = await timed(timings, "start", () =>
      serve(
        "h3 v2",
        process.execPath,
        ["--import", TSX, "server.ts"],
        dir,
        hostEnv({ WEBHOOK_SECRET: secret, PORT: String(port), HOST: "127.0.0.1" }),
        port,
      ),
    );
    return served(running, port, timings);
  },
  // SvelteKit on adapter-node: `vite build`, then the adapter's server, as deployed. SvelteKit 3
  // needs Node 22 or later.
  async sveltekit(context) {
    return buildAndServe(context, "SvelteKit", nodeFor(22), ["vite", "build"], ["build/index.js"]);
  },

  // React Router in framework mode: `react-router build`, then `react-router-serve`, its
  // production server. React Router 8 needs Node 22 or later.
  async "react-router"(context) {
    return buildAndServe(
      context,
      "React Router",
      nodeFor(22),
      ["react-router", "build"],
      [hostBin("react-router-serve"), "build/server/index.js"],
    );
  },

  // Astro on @astrojs/node in standalone mode: `astro build`, then the server entry it wrote.
  // Astro 7 needs Node 22 or later.
  async astro(context) {
    return buildAndServe(context, "Astro", nodeFor(22), ["astro", "build"], ["dist/server/entry.mjs"]);
  },
  // Bun.serve, on the Bun of the repository's devDependencies (as test/runtimes.test.ts runs it).
  async bun(context) {
    return serveOnly(context, "Bun.serve", rootBin("bun"), ["--no-install", "server.ts"]);
  },

  // Elysia on that Bun.
  async elysia(context) {
    return serveOnly(context, "Elysia", rootBin("bun"), ["--no-install", "server.ts"]);
  },

  // Deno.serve, on the Deno of the repository's devDependencies, offline: deno.json maps
  // flag-webhooks to npm: specifiers, which Deno resolves from node_modules
  // (nodeModulesDir: "manual"), and --no-remote refuses anything else.
  async deno(context) {
    return serveOnly(
      context,
      "Deno.serve",
      rootBin("deno"),
      ["run", "--no-remote", "--allow-env", "--allow-net=127.0.0.1", `--allow-read=${hosts}`, "server.ts"],
      { DENO_DIR: join(tmpdir(), "flag-webhooks-hosts-deno"), DENO_NO_UPDATE_CHECK: "1" },
    );
  },
  // Google Cloud Functions: the Functions Framework's own server (what Cloud Run functions run),
  // the function's TypeScript loaded through tsx.
  async gcf(context) {
    return serveOnly(context, "the Functions Framework", process.execPath, functionsFramework());
  },

  // Cloud Functions for Firebase: the onRequest export, served by the same Functions Framework,
  // as Firebase deploys it (2nd gen functions run on Cloud Run functions). Not the Firebase
  // emulator (firebase-tools), which is not needed to run the function.
  async firebase(context) {
    return serveOnly(context, "the Functions Framework (Firebase)", process.execPath, functionsFramework());
  },

  // Azure Functions v4: @azure/functions' app.http() and its own invocation model, driven by
  // host.mjs, a stand-in for the Functions host and its Node worker (see there).
  async azure(context) {
    return serveOnly(context, "the Azure Functions stand-in host", process.execPath, [
      "--import",
      TSX,
      "host.mjs",
      "src/functions/webhooks.ts",
    ]);
  },

  // Netlify Functions: Netlify's own local runtime (@netlify/functions-dev) behind host.mjs, with
  // a real Redis for the dedupe store (each invocation runs in a fresh worker). Needs Node 22.
  async netlify(context) {
    const redis = await startRedis();
    try {
      const app = await serveOnly(context, "Netlify's functions runtime", nodeFor(22), ["host.mjs"], {
        REDIS_URL: redis.url,
      });
      return {
        ...app,
        async stop() {
          await app.stop();
          await stopRedis(redis);
        },
      };
    } catch (error) {
      await stopRedis(redis);
      throw error;
    }
  },

  // Vercel Functions: @vercel/node's own development runtime (startDevServer, as `vercel dev`
  // runs each function, Node.js and Edge) behind host.mjs.
  async vercel(context) {
    return serveOnly(context, "Vercel's functions runtime", process.execPath, ["host.mjs"]);
  },
};

/** The Functions Framework's command line on the function in index.ts, listening on PORT. */
function functionsFramework(): string[] {
  return [
    "--import",
    TSX,
    join(hosts, "node_modules/@google-cloud/functions-framework/build/src/main.js"),
    "--target=webhooks",
    "--source=index.ts",
  ];
}

/** An app that runs from its source, with no build: its server, listening on PORT and HOST. */
async function serveOnly(
  { port, secret, dir }: AppContext,
  label: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Served> {
  const timings: Record<string, number> = {};
  const running = await timed(timings, "start", () =>
    serve(
      label,
      command,
      args,
      dir,
      hostEnv({ WEBHOOK_SECRET: secret, PORT: String(port), HOST: "127.0.0.1", ...env }),
      port,
    ),
  );
  return served(running, port, timings);
}

/**
 * The usual production flow: the framework's build command (a binary of this package), then its
 * server, on `node`, listening on PORT and HOST as these servers all read them.
 */
async function buildAndServe(
  { port, secret, dir }: AppContext,
  label: string,
  node: string,
  [command, ...args]: string[],
  server: string[],
): Promise<Served> {
  const timings: Record<string, number> = {};
  await timed(timings, "build", () => run(`${label}: ${command}`, node, [hostBin(command ?? ""), ...args], dir));
  const running = await timed(timings, "start", () =>
    serve(label, node, server, dir, hostEnv({ WEBHOOK_SECRET: secret, PORT: String(port), HOST: "127.0.0.1" }), port),
  );
  return served(running, port, timings);
}
