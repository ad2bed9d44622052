// pages/api/parsed.ts: the same route with Next.js' body parser left on, as a user might forget:
// flag-webhooks must answer with an error that names the line to add.
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import type { NextApiRequest, NextApiResponse } from "next";

const webhooks = webhookMiddleware<NextApiRequest, NextApiResponse>({
  secret: process.env.WEBHOOK_SECRET!,
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

export default function handler(req: NextApiRequest, res: NextApiResponse): Promise<void> {
  return webhooks(req, res, () => {});
}
