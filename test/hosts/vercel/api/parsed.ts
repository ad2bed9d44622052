// The function of webhooks.ts with Vercel's helpers on, as they are by default: flag-webhooks
// answers every delivery with body_already_parsed.
import type { VercelRequest, VercelResponse } from "@vercel/node";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";

const webhooks = webhookMiddleware<VercelRequest, VercelResponse>({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

export default function handler(req: VercelRequest, res: VercelResponse): Promise<void> {
  return webhooks(req, res, () => {});
}
