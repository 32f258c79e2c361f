// The conformance cases through openapi-fetch over the types
// openapi-typescript generates from crates/drover-http/openapi.json
// (generated/openapi-fetch/schema.ts, written at test time).

import createClient from "openapi-fetch";

import { type Answer, type Call, main, type Step } from "./cases.js";
import type { components, operations, paths } from "./generated/openapi-fetch/schema.js";

type Schemas = components["schemas"];
type Query<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;

const baseUrl = process.env["DROVER_URL"] ?? "";

function client(bearer: string | undefined) {
  return createClient<paths>({
    baseUrl,
    headers: bearer === undefined ? {} : { Authorization: `Bearer ${bearer}` },
  });
}

function answer(r: { data?: unknown; error?: unknown; response: Response }): Answer {
  const error = r.error !== undefined;
  return { status: r.response.status, headers: r.response.headers, body: error ? r.error : r.data, error };
}

const call: Call = async (step: Step, bearer: string | undefined): Promise<Answer> => {
  const c = client(bearer);
  const header = step.idempotencyKey === undefined ? {} : { "Idempotency-Key": step.idempotencyKey };
  const id = String(step.path["id"]);
  switch (step.op) {
    case "enqueue_one":
      return answer(await c.POST("/v1/items", { params: { header }, body: step.body as Schemas["EnqueueRequest"] }));
    case "enqueue_batch":
      return answer(await c.POST("/v1/items/batch", { params: { header }, body: step.body as Schemas["BatchRequest"] }));
    case "list_items":
      return answer(await c.GET("/v1/items", { params: { query: step.query as Query<"list_items"> } }));
    case "get_item":
      return answer(await c.GET("/v1/items/{id}", { params: { path: { id }, query: step.query as Query<"get_item"> } }));
    case "cancel_item":
      return answer(
        await c.POST("/v1/items/{id}/cancel", {
          params: { path: { id }, query: step.query as Query<"cancel_item">, header },
        }),
      );
    case "retry_item":
      return answer(
        await c.POST("/v1/items/{id}/retry", {
          params: { path: { id }, query: step.query as Query<"retry_item">, header },
        }),
      );
    case "bulk":
      return answer(await c.POST("/v1/items/bulk", { params: { header }, body: step.body as Schemas["BulkRequest"] }));
    case "stats":
      return answer(await c.GET("/v1/stats"));
    case "openapi_json":
      return answer(await c.GET("/v1/openapi.json"));
    default:
      throw new Error(`operation ${step.op} has no call in this program`);
  }
};

await main(call);
