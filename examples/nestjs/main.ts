// NestJS on Express: `WEBHOOK_SECRET=... npx tsx --tsconfig examples/nestjs/tsconfig.json examples/nestjs/main.ts`,
// then POST deliveries to /webhooks.
import "reflect-metadata";
import { fileURLToPath } from "node:url";
import { NestFactory } from "@nestjs/core";
import type { NestExpressApplication } from "@nestjs/platform-express";
import { AppModule } from "./app.module.js";

export async function createApp(options: { rawBody?: boolean } = {}): Promise<NestExpressApplication> {
  // rawBody: true makes Nest's JSON parser keep the bytes in req.rawBody: the signature covers
  // them, not the parsed object. Without it, every delivery is answered 500 body_already_parsed.
  const app = await NestFactory.create<NestExpressApplication>(AppModule, {
    rawBody: options.rawBody ?? true,
    logger: false,
  });
  // body-parser refuses JSON bodies over 100 KiB by default, with its own 413, before flag-webhooks
  // sees them: raise it to what your deliveries need (flag-webhooks' own limit is 1 MiB).
  app.useBodyParser("json", { limit: "1mb" });
  return app;
}

// Started in an async function, not with top-level await: Nest CLI projects compile to CommonJS,
// which has none.
async function bootstrap(): Promise<void> {
  const port = Number(process.env.PORT ?? 3000);
  const app = await createApp();
  await app.listen(port, "127.0.0.1");
  console.log(`listening on http://127.0.0.1:${port}/webhooks`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) void bootstrap();
