// Exactly once in your own database: each event's audit row commits with its event id, in one
// transaction, whatever crashes. `DATABASE_URL=postgres://... WEBHOOK_SECRET=... npx tsx
// examples/postgres/server.ts` (PORT, default 3000). Run it on as many instances as you like.
import { fileURLToPath } from "node:url";
import express from "express";
import { createRouter } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";

export async function createApp(secret: string, pool: pg.Pool): Promise<express.Express> {
  const inbox = new PostgresInbox(pool, { scope: "audit-app" });
  await inbox.migrate(); // the inbox's table; idempotent
  await pool.query(
    "create table if not exists audit (event_id text not null, type text not null, flag text, at timestamptz default now())",
  );
  // Handlers take (event, tx): what they write through tx commits with the event id, or not at all.
  const router = createRouter<[tx: pg.PoolClient]>()
    .on("flag.updated", async (event, tx) => {
      await tx.query("insert into audit (event_id, type, flag) values ($1, $2, $3)", [
        event.id,
        event.type,
        event.data.flag,
      ]);
    })
    .onAny(async (event, tx) => {
      if (event.type !== "flag.updated") {
        await tx.query("insert into audit (event_id, type) values ($1, $2)", [event.id, event.type]);
      }
    });
  // Forget handled ids after the retention (30 days): hourly, on every instance (each run is cheap).
  setInterval(() => inbox.prune().catch((error) => console.error("prune:", error)), 60 * 60 * 1000).unref();

  const app = express();
  app.post("/webhooks", webhookMiddleware({ secret, maxAge: "5m", onEvent: inbox.handle(router) }));
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const pool = new pg.Pool({
    connectionString: process.env.DATABASE_URL,
    connectionTimeoutMillis: 3000, // a database that cannot be reached answers 503 soon
  });
  pool.on("error", (error) => console.error("pool:", error.message)); // an idle client lost its server
  const app = await createApp(process.env.WEBHOOK_SECRET ?? "", pool);
  const server = app.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", () => {
    const { port } = server.address() as { port: number };
    console.log(`listening on http://127.0.0.1:${port}/webhooks`);
  });
  process.on("SIGTERM", () => server.close(() => void pool.end()));
}
