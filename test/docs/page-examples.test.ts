import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { Queue } from "bullmq";
import { eventJobId } from "flag-webhooks/bullmq";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "../support/dynalite.js";
import { freePort } from "../support/free-port.js";
import { type PackedProject, packedProject, root } from "../support/packed.js";
import { type PostgresServer, postgresAvailability, startPostgres, stopPostgres } from "../support/postgres-server.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";
import { codeBlocks, listening, type Run, stop, tsx, tsxToEnd, withPort } from "../support/snippets.js";

// Each page's first example, pasted into a user's project with the packed package installed, and
// run there with tsx as its page says to run it: a server gets signed deliveries over HTTP, a
// module's exported handler is called with the test kit's requests and events, a script runs to
// its end. The one change made to an example is the port it listens on (3000) or finds Redis on
// (6379), for free ones (test/support/snippets.ts: withPort). The setup snippets the pages give
// (the DynamoDB table, the OpenTelemetry SDK, a CommonJS start-up) run the same way.

const SECRET = "whsec-page-examples";
const first = (page: string) => codeBlocks(page)[0] ?? "";
const postgres = postgresAvailability();
const redis = redisAvailability();

let project: PackedProject;
const runs: Run[] = [];
beforeAll(() => {
  project = packedProject("module");
  // What the examples import, as the user would have installed it.
  project.link(
    "express",
    "koa",
    "fastify",
    "hono",
    "@nestjs/common",
    "@nestjs/core",
    "@nestjs/platform-express",
    "reflect-metadata",
    "rxjs",
    "pg",
    "ioredis",
    "bullmq",
    "@aws-sdk/client-dynamodb",
    "@opentelemetry/api",
    "@opentelemetry/sdk-node",
    "@opentelemetry/sdk-metrics",
    "@opentelemetry/exporter-trace-otlp-http",
    "@opentelemetry/exporter-metrics-otlp-http",
    "@opentelemetry/instrumentation-http",
    "vitest",
    "supertest",
  );
}, 120_000);
afterEach(async () => {
  await Promise.all(runs.splice(0).map(stop));
});
afterAll(() => {
  project?.remove();
});

/** Writes a page's example into the project as `<name>.ts` (in `folder`) and returns its path. */
function paste(name: string, code: string, folder = ""): string {
  return project.write(join(folder, `${name}.ts`), code);
}

/** Starts a server example on a free port and resolves once it listens. */
async function serve(
  name: string,
  code: string,
  env: Record<string, string> = {},
  options: { folder?: string; nodeArgs?: string[] } = {},
): Promise<{ port: number; run: Run }> {
  const port = await freePort();
  const file = paste(name, withPort(code, 3000, port), options.folder);
  const run = tsx(join(project.dir, options.folder ?? ""), file, { WEBHOOK_SECRET: SECRET, ...env }, options.nodeArgs);
  runs.push(run);
  await listening(run, port);
  return { port, run };
}

/** POSTs a signed delivery of `event` (a new flag.updated by default) and returns the answer. */
async function deliver(port: number, path: string, event: object = createEvent("flag.updated"), secret = SECRET) {
  const { body, headers } = await signedDelivery({ secret, event });
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers, body });
  return { status: response.status, duplicate: response.headers.get("webhook-duplicate"), body: await response.text() };
}

/** Runs a driver module that imports an example, and resolves with the JSON its last line prints. */
async function drive(name: string, driver: string, env: Record<string, string> = {}): Promise<unknown> {
  const file = project.write(`${name}.driver.ts`, driver);
  const { code, output } = await tsxToEnd(project.dir, file, { WEBHOOK_SECRET: SECRET, ...env });
  expect(code, output).toBe(0);
  return JSON.parse(output.trim().split("\n").at(-1) ?? "");
}

describe("each page's first example, run as pasted from the packed package", () => {
  it.each(["README.md", "docs/express.md"])(
    "%s: the Express app answers a signed delivery 204 and a forged one 401",
    async (page) => {
      const { port } = await serve("express", first(page));
      expect((await deliver(port, "/webhooks")).status).toBe(204);
      expect((await deliver(port, "/webhooks", createEvent("flag.updated"), "forged")).status).toBe(401);
    },
    120_000,
  );

  it("docs/koa.md: the Koa app answers 204 and 401", async () => {
    const { port } = await serve("koa", first("docs/koa.md"));
    expect((await deliver(port, "/webhooks")).status).toBe(204);
    expect((await deliver(port, "/webhooks", createEvent("flag.deleted"), "forged")).status).toBe(401);
  }, 120_000);

  it("docs/fastify.md: the Fastify app answers 204, and its other routes keep their JSON parser", async () => {
    const { port } = await serve("fastify", first("docs/fastify.md"));
    expect((await deliver(port, "/webhooks")).status).toBe(204);
    const other = await fetch(`http://127.0.0.1:${port}/api/things`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"a":1}',
    });
    // The status first: once in a CI run the body came back empty, and only the status says why.
    expect(other.status).toBe(200);
    expect(await other.json()).toEqual({ a: 1 });
  }, 120_000);

  it("docs/nestjs.md: the Nest app answers 204 and 401", async () => {
    // A Nest project compiles with TypeScript's legacy decorators, as the Nest CLI sets up.
    project.write("nest/tsconfig.json", '{ "compilerOptions": { "experimentalDecorators": true } }\n');
    const { port } = await serve("nestjs", first("docs/nestjs.md"), {}, { folder: "nest" });
    expect((await deliver(port, "/webhooks")).status).toBe(204);
    expect((await deliver(port, "/webhooks", createEvent("flag.updated"), "forged")).status).toBe(401);
  }, 120_000);

  it("docs/observability.md: the instrumented app answers 204 with no SDK registered", async () => {
    const { port } = await serve("observability", first("docs/observability.md"));
    expect((await deliver(port, "/webhooks")).status).toBe(204);
  }, 120_000);

  it.each(["docs/fetch.md", "docs/delivery.md"])(
    "%s: the exported POST route handler answers 204 and 401",
    async (page) => {
      const name = page.replace(/\W+/g, "-");
      paste(name, first(page));
      const result = await drive(
        name,
        `import { POST } from "./${name}.ts";
import { createEvent, signedRequest } from "flag-webhooks/testing";
const secret = process.env.WEBHOOK_SECRET!;
const ok = await POST(await signedRequest({ secret, event: createEvent("flag.updated") }));
const forged = await POST(await signedRequest({ secret: "forged", event: createEvent("rollout.step") }));
console.log(JSON.stringify([ok.status, forged.status]));
`,
      );
      expect(result).toEqual([204, 401]);
    },
    120_000,
  );

  it("docs/hono.md: the exported app answers through its fetch", async () => {
    paste("hono", first("docs/hono.md"));
    const result = await drive(
      "hono",
      `import app from "./hono.ts";
import { createEvent, signedRequest } from "flag-webhooks/testing";
const secret = process.env.WEBHOOK_SECRET!;
const ok = await app.fetch(await signedRequest({ secret, event: createEvent("flag.updated") }));
const forged = await app.fetch(await signedRequest({ secret: "forged", event: createEvent("flag.updated") }));
console.log(JSON.stringify([ok.status, forged.status]));
`,
    );
    expect(result).toEqual([204, 401]);
  }, 120_000);

  it("docs/lambda.md: the exported handler answers HTTP API and REST API events", async () => {
    paste("lambda", first("docs/lambda.md"));
    const result = await drive(
      "lambda",
      `import { handler } from "./lambda.ts";
import { createEvent, lambdaContext, signedLambdaEvent } from "flag-webhooks/testing";
const secret = process.env.WEBHOOK_SECRET!;
const event = createEvent("flag.updated");
const v2 = await handler(await signedLambdaEvent({ secret, event }), lambdaContext());
const v1 = await handler(await signedLambdaEvent({ secret, event, version: "v1" }), lambdaContext());
const forged = await handler(await signedLambdaEvent({ secret: "forged", event }), lambdaContext());
console.log(JSON.stringify([v2.statusCode, v1.statusCode, forged.statusCode]));
`,
    );
    expect(result).toEqual([204, 204, 401]);
  }, 120_000);

  it("docs/core.md: handle() verifies with either secret of a rotation and logs the changes", async () => {
    paste("core", first("docs/core.md"));
    const result = await drive(
      "core",
      `import { handle } from "./core.ts";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
const signed = await signedDelivery({ secret: process.env.WEBHOOK_SECRET_OLD!, event: createEvent("flag.updated") });
await handle({ headers: signed.headers } as never, Buffer.from(signed.body));
const forged = await signedDelivery({ secret: "forged", event: createEvent("flag.updated") });
const refused = await handle({ headers: forged.headers } as never, Buffer.from(forged.body)).catch((error) => error.code);
console.log(JSON.stringify(refused));
`,
      { WEBHOOK_SECRET_OLD: "whsec-previous" },
    );
    expect(result).toBe("invalid_signature");
  }, 120_000);

  it("docs/emulator.md: the end-to-end script runs to its end and prints the change", async () => {
    const { code, output } = await tsxToEnd(project.dir, paste("emulator", first("docs/emulator.md")));
    expect(code, output).toBe(0);
    expect(output).toContain("path: 'on', from: false, to: true");
  }, 120_000);

  it("docs/testing.md: its example test files (supertest, fetch, Lambda) pass under vitest", async () => {
    const blocks = codeBlocks("docs/testing.md");
    expect(blocks).toHaveLength(3);
    for (const [i, code] of blocks.entries()) project.write(`testing-${i + 1}.test.ts`, code);
    const output = execFileSync(
      process.execPath,
      [join(root, "node_modules/vitest/vitest.mjs"), "run", "--root", project.dir, "testing-"],
      {
        cwd: project.dir,
        encoding: "utf8",
        env: { ...process.env, NODE_OPTIONS: "", NO_COLOR: "1", FORCE_COLOR: "0" },
      },
    );
    expect(output).toMatch(/Tests\s+3 passed/);
  }, 120_000);
});

describe.skipIf(!postgres.available)("docs/postgres.md on a real PostgreSQL", () => {
  let server: PostgresServer;
  let db: pg.Pool;
  beforeAll(async () => {
    server = await startPostgres();
    db = new pg.Pool({ connectionString: server.url, max: 2 });
    // A CommonJS project beside the ES module one, as `npm init` makes it.
    project.write("cjs/package.json", '{ "name": "cjs-project", "private": true, "type": "commonjs" }\n');
  }, 120_000);
  afterAll(async () => {
    await db?.end();
    await stopPostgres(server);
  });

  it("its first example makes its table, answers 204, writes the audit row once, and is silent", async () => {
    const { port, run } = await serve("postgres", first("docs/postgres.md"), { DATABASE_URL: server.url });
    const event = createEvent("flag.updated");
    const answers = [await deliver(port, "/webhooks", event), await deliver(port, "/webhooks", event)];
    expect(answers.map(({ status, duplicate }) => [status, duplicate])).toEqual([
      [204, null],
      [204, "true"],
    ]);
    const { rows } = await db.query("select event_id, type from audit where event_id = $1", [event.id]);
    expect(rows).toEqual([{ event_id: event.id, type: "flag.updated" }]);
    // Started again on the same database: migrate() and the table's DDL are safe to repeat.
    await stop(run);
    const again = await serve("postgres", first("docs/postgres.md"), { DATABASE_URL: server.url });
    expect((await deliver(again.port, "/webhooks", event)).duplicate).toBe("true");
    expect(run.output()).not.toMatch(/NOTICE|already exists/);
  }, 180_000);

  it("fails in a CommonJS project as the page warns, and runs there as main() (typescript-and-runtimes.md)", async () => {
    const port = await freePort();
    const file = paste("postgres", withPort(first("docs/postgres.md"), 3000, port), "cjs");
    const { code, output } = await tsxToEnd(join(project.dir, "cjs"), file, {
      WEBHOOK_SECRET: SECRET,
      DATABASE_URL: server.url,
    });
    expect(code).not.toBe(0);
    expect(output).toMatch(/Top-level await is currently not supported with the "cjs" output format/);
    const { port: cjsPort } = await serve(
      "main",
      first("docs/typescript-and-runtimes.md"),
      { DATABASE_URL: server.url },
      { folder: "cjs" },
    );
    expect((await deliver(cjsPort, "/webhooks")).status).toBe(204);
  }, 180_000);
});

describe.skipIf(!redis.available)("docs/redis.md and docs/queues.md on a real Redis", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(() => stopRedis(server));

  it("docs/redis.md: the fleet's app answers 204, then the same event as a duplicate", async () => {
    const { port } = await serve("redis", first("docs/redis.md"), { REDIS_URL: server.url });
    const event = createEvent("flag.updated");
    const answers = [await deliver(port, "/webhooks", event), await deliver(port, "/webhooks", event)];
    expect(answers.map(({ status, duplicate }) => [status, duplicate])).toEqual([
      [204, null],
      [204, "true"],
    ]);
  }, 120_000);

  it("docs/queues.md: the receiver answers 202 once the job is in the queue", async () => {
    const { port } = await serve("queues", withPort(first("docs/queues.md"), 6379, server.port));
    const event = createEvent("flag.updated");
    expect((await deliver(port, "/webhooks", event)).status).toBe(202);
    const queue = new Queue("flag-events", { connection: { host: "127.0.0.1", port: server.port } });
    try {
      const job = await queue.getJob(eventJobId(event.id));
      expect([job?.name, job?.data.id]).toEqual(["flag.updated", event.id]);
    } finally {
      await queue.close();
    }
  }, 120_000);
});

describe("docs/serverless-stores.md on dynalite, configured by the environment alone", () => {
  let dynalite: Dynalite;
  let env: Record<string, string>;
  beforeAll(async () => {
    // The page's own snippet makes the table; dynalite's helper makes only one it does not use.
    dynalite = await startDynalite("unused");
    env = {
      AWS_ENDPOINT_URL_DYNAMODB: dynalite.endpoint,
      AWS_REGION: "local",
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
      DEDUPE_TABLE: "flag-webhooks-dedupe",
    };
  });
  afterAll(() => stopDynalite(dynalite));

  it("makes the table with the SDK script, twice (dynalite refuses UpdateTimeToLive), then the handler dedupes", async () => {
    const script = paste("dynamodb-table", codeBlocks("docs/serverless-stores.md")[1] ?? "");
    for (const run of [1, 2]) {
      const { code, output } = await tsxToEnd(project.dir, script, env);
      expect(code, `run ${run}: ${output}`).toBe(0);
    }
    const { Table } = await dynalite.client().send(new DescribeTableCommand({ TableName: "flag-webhooks-dedupe" }));
    expect([Table?.KeySchema, Table?.BillingModeSummary?.BillingMode]).toEqual([
      [{ AttributeName: "pk", KeyType: "HASH" }],
      "PAY_PER_REQUEST",
    ]);

    paste("dynamodb", first("docs/serverless-stores.md"));
    const result = await drive(
      "dynamodb",
      `import { handler } from "./dynamodb.ts";
import { createEvent, lambdaContext, signedLambdaEvent } from "flag-webhooks/testing";
const lambdaEvent = await signedLambdaEvent({ secret: process.env.WEBHOOK_SECRET!, event: createEvent("flag.updated") });
const answers = [];
for (const _ of [1, 2]) {
  const { statusCode, headers } = await handler(lambdaEvent, lambdaContext());
  answers.push([statusCode, headers?.["webhook-duplicate"] ?? null]);
}
console.log(JSON.stringify(answers));
`,
      env,
    );
    expect(result).toEqual([
      [204, null],
      [204, "true"],
    ]);
  }, 180_000);
});

describe("docs/observability.md's SDK set-up, loaded with --import", () => {
  let collector: Server;
  const received: { path: string; body: any }[] = [];
  beforeAll(async () => {
    // An OTLP/HTTP endpoint, as a Collector listens on 4318: JSON, which the exporters send.
    collector = createServer((request, response) => {
      let text = "";
      request.on("data", (chunk) => {
        text += chunk;
      });
      request.on("end", () => {
        received.push({ path: request.url ?? "", body: JSON.parse(text) });
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve));
  });
  afterAll(() => new Promise<void>((resolve) => collector.close(() => resolve())));

  it("exports the delivery's span, a child of the HTTP server span, and its metrics, over OTLP", async () => {
    const [app, telemetry] = codeBlocks("docs/observability.md");
    project.write("telemetry.ts", telemetry ?? "");
    const { port: collectorPort } = collector.address() as { port: number };
    const { port, run } = await serve(
      "observed",
      app ?? "",
      { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collectorPort}` },
      { nodeArgs: ["--import", "./telemetry.ts"] },
    );
    expect((await deliver(port, "/webhooks")).status).toBe(204);
    // The set-up's SIGTERM handler exports what is buffered, then exits.
    run.child.kill("SIGTERM");
    expect(await run.exited, run.output()).toBe(0);

    const spans = received
      .filter(({ path }) => path === "/v1/traces")
      .flatMap(({ body }) => body.resourceSpans)
      .flatMap((resource: any) =>
        resource.scopeSpans.flatMap((scope: any) =>
          scope.spans.map((span: any) => ({ ...span, service: serviceName(resource) })),
        ),
      );
    const receive = spans.find((span: any) => span.name === "flag-webhooks.receive");
    const server = spans.find((span: any) => span.spanId === receive?.parentSpanId);
    expect([receive?.service, server?.kind, server?.name]).toEqual(["flag-audit", 2, "POST"]);
    const metrics = received
      .filter(({ path }) => path === "/v1/metrics")
      .flatMap(({ body }) => body.resourceMetrics)
      .flatMap((resource: any) => resource.scopeMetrics.flatMap((scope: any) => scope.metrics.map((m: any) => m.name)));
    expect(metrics).toContain("flag_webhooks.deliveries");
  }, 120_000);
});

function serviceName(resource: any): string | undefined {
  return resource.resource?.attributes?.find((a: any) => a.key === "service.name")?.value?.stringValue;
}
