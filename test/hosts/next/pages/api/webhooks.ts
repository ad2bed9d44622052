import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import type { NextApiRequest, NextApiResponse } from "next";

// Next.js parses API route bodies unless told not to, and the signature covers the raw bytes.
export const config = { api: { bodyParser: false } };

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
