import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

const webhooks = webhookHandler({
  secret: Deno.env.get("WEBHOOK_SECRET") ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

Deno.serve({ port: Number(Deno.env.get("PORT") ?? 8000), hostname: Deno.env.get("HOST") }, (request) =>
  new URL(request.url).pathname === "/webhooks" ? webhooks(request) : new Response(null, { status: 404 }),
);
