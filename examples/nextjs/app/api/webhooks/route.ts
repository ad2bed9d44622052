// Next.js App Router: app/api/webhooks/route.ts. Route handlers receive a standard Request whose
// body no framework has parsed, so the fetch handler reads the raw bytes itself.
import { webhookHandler } from "flag-webhooks/fetch";

export const POST = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  async onEvent(event) {
    if (event.type === "flag.updated") {
      // e.g. revalidateTag(`flag:${event.data.flag}`)
      console.log(`flag ${event.data.flag} changed by ${event.data.actor.email}`);
    }
  },
});
