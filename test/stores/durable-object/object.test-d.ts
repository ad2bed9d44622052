import type { DurableObjectNamespace, DurableObjectStub, Rpc } from "@cloudflare/workers-types";
import { type DedupeObject, DurableObjectDedupeStore } from "flag-webhooks/cloudflare";
import { describe, expectTypeOf, it } from "vitest";

// The runtime's types tell a Durable Object class by a mark (Rpc.DurableObjectBranded), and a
// namespace typed by its class (as `wrangler types` writes it) requires it of the class.
describe("DedupeObject in the runtime's types", () => {
  it("is a Durable Object class to @cloudflare/workers-types", () => {
    expectTypeOf<DedupeObject>().toExtend<Rpc.DurableObjectBranded>();
    expectTypeOf<DedupeObject>().toExtend<Rpc.EntrypointBranded>();
  });

  it("types a namespace and its stubs, which the store takes as they are", () => {
    const namespace = {} as DurableObjectNamespace<DedupeObject>;
    expectTypeOf(namespace.getByName("flag-audit:0")).toEqualTypeOf<DurableObjectStub<DedupeObject>>();
    new DurableObjectDedupeStore(namespace, { scope: "flag-audit" });
  });

  it("has no value for the mark: it is a type only", () => {
    expectTypeOf<DedupeObject["__DURABLE_OBJECT_BRAND"]>().toBeNever();
  });
});
