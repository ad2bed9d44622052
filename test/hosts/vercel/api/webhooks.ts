import type { VercelRequest, VercelResponse } from "@vercel/node";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";

// Deployed with the environment variable NODEJS_HELPERS=0: Vercel's helpers would read the whole
// body first and put it parsed on req.body, and the signature covers the raw bytes.
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
