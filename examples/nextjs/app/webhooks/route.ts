// Next.js App Router: app/webhooks/route.ts, served at /webhooks. Route handlers receive a
// standard Request whose body no framework has parsed, so the fetch handler reads the raw bytes
// itself.
import { webhookHandler } from "flag-webhooks/fetch";

// `next build` evaluates this module to collect the route's config, usually without the
// deployment's secrets, and webhookHandler checks its options when it is made: so it is made on
// the first request, where WEBHOOK_SECRET is set.
let handler: ((request: Request) => Promise<Response>) | undefined;

export function POST(request: Request): Promise<Response> {
  handler ??= webhookHandler({
    secret: process.env.WEBHOOK_SECRET ?? "",
    async onEvent(event) {
      if (event.type === "flag.updated") {
        // e.g. revalidateTag(`flag:${event.data.flag}`)
        console.log(`flag ${event.data.flag} changed by ${event.data.actor.email}`);
      }
    },
  });
  return handler(request);
}
