// The route of webhooks.ts with Next.js' body parser left on, as it is by default: flag-webhooks
// answers every delivery with body_already_parsed.
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import type { NextApiRequest, NextApiResponse } from "next";

const webhooks = webhookMiddleware<NextApiRequest, NextApiResponse>({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

export default function handler(req: NextApiRequest, res: NextApiResponse): Promise<void> {
  return webhooks(req, res, () => {});
}
