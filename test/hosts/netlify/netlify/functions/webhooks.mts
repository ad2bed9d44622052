import type { Config } from "@netlify/functions";
import { RedisDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { Redis } from "ioredis";

// Each invocation may run in a fresh instance, so the ids handled are kept in Redis, shared by all.
const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: {
    store: new RedisDedupeStore(new Redis(process.env.REDIS_URL ?? "redis://localhost:6379"), { scope: "webhooks" }),
    ttl: "10m",
  },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

// Netlify Functions v2: the function gets the Request unread.
export default (request: Request) => webhooks(request);

export const config: Config = { path: "/webhooks" };
