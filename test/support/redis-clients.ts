import type { RedisClientLike } from "flag-webhooks";
import { Redis as IORedis } from "ioredis";
import { Redis as IORedis5 } from "ioredis5";
import { createClient } from "redis";
import { createClient as createClient4 } from "redis4";

/**
 * One connected client of a real Redis library, as a user would create it, plus the few calls
 * the tests make through that library's own API (not through the store) to check what the store
 * wrote.
 */
export interface TestClient {
  /** What the user hands to `new RedisDedupeStore(client, { scope })`. */
  client: RedisClientLike;
  /** The key's remaining time to live in ms, by the library's own PTTL call. */
  pttl(key: string): Promise<number>;
  get(key: string): Promise<string | null>;
  keys(pattern: string): Promise<string[]>;
  /** Errors the client emitted (a lost connection); the tests expect them while Redis is down. */
  errors: unknown[];
  quit(): Promise<void>;
}

export interface ClientKind {
  name: string;
  connect(url: string): Promise<TestClient>;
}

// Reconnect quickly after a killed server, so a restart is noticed within a test's patience.
const RECONNECT_MS = 50;

// Both versions share this constructor signature; their class types differ in private members.
type IORedisClass = new (url: string, options: { lazyConnect: boolean; retryStrategy: () => number }) => IORedis;

function ioredis(name: string, Client: IORedisClass): ClientKind {
  return {
    name,
    async connect(url) {
      const errors: unknown[] = [];
      // Defaults otherwise, offline queue included: the core's dedupe.timeout bounds each call.
      const redis = new Client(url, { lazyConnect: true, retryStrategy: () => RECONNECT_MS });
      redis.on("error", (error: unknown) => errors.push(error));
      await redis.connect();
      return {
        client: redis,
        errors,
        pttl: (key) => redis.pttl(key),
        get: (key) => redis.get(key),
        keys: (pattern) => redis.keys(pattern),
        async quit() {
          redis.disconnect();
        },
      };
    },
  };
}

function nodeRedis(name: string, create: typeof createClient | typeof createClient4): ClientKind {
  return {
    name,
    async connect(url) {
      const errors: unknown[] = [];
      // node-redis emits "error" on a lost connection and throws it without a listener.
      const redis = (create as typeof createClient)({ url, socket: { reconnectStrategy: () => RECONNECT_MS } });
      redis.on("error", (error: unknown) => errors.push(error));
      await redis.connect();
      return {
        client: redis,
        errors,
        pttl: (key) => redis.pTTL(key),
        get: (key) => redis.get(key) as Promise<string | null>,
        keys: (pattern) => redis.keys(pattern),
        async quit() {
          // destroy() in v5, disconnect() in v4: close at once, whatever is queued.
          const closing = redis as unknown as { destroy?: () => void; disconnect?: () => Promise<void> };
          if (closing.destroy) closing.destroy();
          else await closing.disconnect?.().catch(() => undefined);
        },
      };
    },
  };
}

/** Every client library the store supports: ioredis 6 and 5, node-redis 5 and 4. */
export const CLIENT_KINDS: ClientKind[] = [
  ioredis("ioredis 6", IORedis),
  ioredis("ioredis 5", IORedis5 as unknown as IORedisClass),
  nodeRedis("node-redis 5", createClient),
  nodeRedis("node-redis 4", createClient4),
];
