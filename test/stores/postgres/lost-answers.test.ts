import { randomUUID } from "node:crypto";
import { createServer, type Server, Socket } from "node:net";
import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// PostgresInbox as a DedupeStore, its claim's answer lost: Postgres ran (and committed) the one
// statement that claims the id, and the connection broke before the answer came back. pg rejects;
// the receiver answers 503 and the sender retries. The claim that landed is this delivery's own,
// and must not hold the id against that retry until the lease runs out (409 until inFlightTtl,
// 60 s by default). A proxy between pg and a real PostgreSQL loses the answer.

const availability = postgresAvailability();
let db: TestDatabase;
let admin: pg.Pool;
let proxy: Server;
let proxyPort: number;
/** The next client message holding this text has its answer lost, and its connection cut. */
let lose: string | undefined;

beforeAll(async () => {
  if (!availability.available) return;
  db = await testDatabase();
  admin = new pg.Pool({ connectionString: db.url, max: 2 });
  await new PostgresInbox(admin, { scope: "setup" }).migrate();
  const target = new URL(db.url);
  proxy = createServer((client) => {
    const upstream = new Socket();
    let dropping = false;
    upstream.connect(Number(target.port), target.hostname);
    client.on("data", (chunk: Buffer) => {
      if (lose !== undefined && chunk.includes(lose)) {
        lose = undefined;
        dropping = true;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (!dropping) {
        client.write(chunk);
        return;
      }
      // Postgres answered (the statement ran and committed): the answer never arrives.
      client.destroy();
      upstream.destroy();
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  proxyPort = (proxy.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((resolve) => proxy?.close(resolve));
  await admin?.end();
  await db?.close();
});

describe.skipIf(!availability.available)("PostgresInbox as a DedupeStore: a claim whose answer was lost", () => {
  it("is freed, that claim only, so the sender's retry claims the id at once; another's claim stands", async () => {
    const url = new URL(db.url);
    url.host = `127.0.0.1:${proxyPort}`;
    const lossyPool = new pg.Pool({ connectionString: url.toString(), max: 2 });
    lossyPool.on("error", () => {});
    try {
      const scope = `lost-${randomUUID().slice(0, 8)}`;
      const store = new PostgresInbox(lossyPool, { scope });
      const peer = new PostgresInbox(admin, { scope });
      const id = `evt_${randomUUID()}`;
      lose = id;
      await expect(store.claim(id, 60_000)).rejects.toThrow();
      expect(lose).toBeUndefined();
      await expect.poll(() => peer.claim(id, 60_000), { timeout: 3000 }).toBe("claimed");

      // A claim of the peer's id that fails the same way frees nothing of the peer's.
      lose = id;
      await expect(store.claim(id, 60_000)).rejects.toThrow();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await new PostgresInbox(admin, { scope }).claim(id, 60_000)).toBe("in_flight");
      // And the store's own release, after a handler that failed, still frees its own claims.
      const other = `evt_${randomUUID()}`;
      expect(await store.claim(other, 60_000)).toBe("claimed");
      await store.release(other);
      expect(await peer.claim(other, 60_000)).toBe("claimed");
    } finally {
      await lossyPool.end();
    }
  });
});
