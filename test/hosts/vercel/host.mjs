// Vercel's own runtime for Node.js and Edge functions in development (@vercel/node's
// startDevServer, what `vercel dev` calls for each function under api/), behind a node:http
// router that sends /api/<name> to its function as `vercel dev` does: the CLI itself needs a
// linked project and the network, this runtime does not. Usage: node host.mjs, with PORT and HOST.
import { readdirSync } from "node:fs";
import { createServer, request as forward } from "node:http";
import { startDevServer } from "@vercel/node";

// Started together: each compiles its TypeScript on start.
const functions = new Map(
  await Promise.all(
    readdirSync("api").map(async (file) => {
      const entrypoint = `api/${file}`;
      const started = await startDevServer({
        entrypoint,
        workPath: process.cwd(),
        repoRootPath: process.cwd(),
        config: {},
        files: {},
        // NODEJS_HELPERS=0 is a project's environment variable on Vercel; here webhooks.ts alone
        // gets it, so that parsed.ts shows what a (req, res) function with the helpers on answers.
        meta: {
          isDev: true,
          env: { WEBHOOK_SECRET: process.env.WEBHOOK_SECRET },
          buildEnv: file === "webhooks.ts" ? { NODEJS_HELPERS: "0" } : {},
        },
      });
      return [`/${entrypoint.replace(/\.ts$/, "")}`, started];
    }),
  ),
);
process.on("SIGTERM", async () => {
  await Promise.all([...functions.values()].map((f) => f.shutdown?.()));
  process.exit(0);
});

createServer((req, res) => {
  const target = functions.get(new URL(req.url, "http://localhost").pathname);
  if (!target) {
    res.writeHead(404).end();
    return;
  }
  const proxied = forward(
    { host: "127.0.0.1", port: target.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  req.pipe(proxied);
}).listen(Number(process.env.PORT), process.env.HOST);
