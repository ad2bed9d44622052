import { randomUUID } from "node:crypto";
import { createServer, type Server, Socket } from "node:net";
import { RedisDedupeStore } from "flag-webhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_KINDS, type TestClient } from "../../support/redis-clients.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../../support/redis-server.js";

// A claim whose answer is lost: Redis ran the SET, and the connection broke before its reply came
// back. ioredis sends a command again after it reconnects (autoResendUnfulfilledCommands, on by
// default); node-redis rejects it. Either way the claim that landed is this delivery's own, and it
// must not hold the id against the sender's retry until the lease runs out (60 s by default). A
// proxy between the client and a real redis-server loses the reply, as a broken connection would.

const availability = redisAvailability();
const SCOPE = "lost-answers";
const LEASE = 60_000;

/**
 * A TCP proxy to Redis that, once armed, forwards the next command that names `key`, then drops
 * Redis's reply to it and cuts the client's connection: the command ran, its answer is lost.
 */
class LossyProxy {
  readonly server: Server;
  #armed: string | undefined;
  readonly #sockets = new Set<Socket>();
  /** How many replies were lost. */
  lost = 0;

  constructor(upstreamPort: number) {
    this.server = createServer((client) => {
      const upstream = new Socket();
      this.#sockets.add(client).add(upstream);
      let dropping = false;
      upstream.connect(upstreamPort, "127.0.0.1");
      client.on("data", (chunk: Buffer) => {
        if (this.#armed !== undefined && chunk.includes(this.#armed)) {
          this.#armed = undefined;
          dropping = true;
        }
        upstream.write(chunk);
      });
      upstream.on("data", (chunk: Buffer) => {
        if (!dropping) {
          client.write(chunk);
          return;
        }
        this.lost++;
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
  }

  arm(key: string): void {
    this.#armed = key;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `redis://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

let redis: RedisServer | undefined;
let proxy: LossyProxy | undefined;
const clients: TestClient[] = [];

beforeAll(async () => {
  if (availability.available) redis = await startRedis();
});
afterEach(async () => {
  for (const client of clients.splice(0)) await client.quit();
  await proxy?.close();
  proxy = undefined;
});
afterAll(async () => {
  await stopRedis(redis);
});

describe.skipIf(!availability.available)("RedisDedupeStore: a claim whose answer was lost", () => {
  describe.each(CLIENT_KINDS)("on $name", (kind) => {
    it("is this delivery's own: claimed, or released, never held against the retry until the lease ends", async () => {
      const server = redis as RedisServer;
      proxy = new LossyProxy(server.port);
      const client = await kind.connect(await proxy.listen());
      const inspector = await kind.connect(server.url);
      clients.push(client, inspector);
      const store = new RedisDedupeStore(client.client, { scope: SCOPE, timeout: 3000 });
      const id = `evt_${randomUUID()}`;
      proxy.arm(id);
      let first: string;
      try {
        first = await store.claim(id, LEASE);
      } catch {
        first = "failed";
      }
      expect(proxy.lost).toBe(1);
      // ioredis sent the SET again and got this claim's own token back: that claim is this one.
      // node-redis rejected it: the receiver answers 503, and the claim that landed is released.
      if (first === "failed") {
        await expect.poll(() => inspector.get(`flag-webhooks:dedupe:${SCOPE}:${id}`), { timeout: 3000 }).toBeNull();
        expect(await store.claim(id, LEASE)).toBe("claimed");
      } else {
        expect(first).toBe("claimed");
      }
      // Either way the id is claimed once, by this store, with the lease it asked for.
      expect(await inspector.pttl(`flag-webhooks:dedupe:${SCOPE}:${id}`)).toBeGreaterThan(LEASE - 5000);
      // And another delivery of the id meanwhile is in flight, as before.
      const peer = new RedisDedupeStore(inspector.client, { scope: SCOPE });
      expect(await peer.claim(id, LEASE)).toBe("in_flight");
      expect(await store.claim(id, LEASE)).toBe("in_flight");
      await store.release(id);
      expect(await peer.claim(id, LEASE)).toBe("claimed");
    });
  });
});
