// The conformance cases through the SDK @hey-api/openapi-ts generates from
// crates/drover-http/openapi.json (generated/hey-api/, written at test
// time, with its bundled fetch client).

import { type Answer, type Call, main, type Step } from "./cases.js";
import { createClient, createConfig } from "./generated/hey-api/client/index.js";
import {
  bulk,
  cancelItem,
  enqueueBatch,
  enqueueOne,
  getItem,
  listItems,
  openapiJson,
  retryItem,
  stats,
} from "./generated/hey-api/sdk.gen.js";
import type {
  BatchRequest,
  BulkRequest,
  CancelItemData,
  EnqueueRequest,
  GetItemData,
  ListItemsData,
  RetryItemData,
} from "./generated/hey-api/types.gen.js";

const baseUrl = process.env["DROVER_URL"] ?? "";

function answer(r: { data?: unknown; error?: unknown; response?: Response }): Answer {
  if (r.response === undefined) throw new Error("no response");
  const error = r.error !== undefined;
  return { status: r.response.status, headers: r.response.headers, body: error ? r.error : r.data, error };
}

const call: Call = async (step: Step, bearer: string | undefined): Promise<Answer> => {
  // The SDK sends the token as `Authorization: Bearer` on the operations
  // the document marks with the bearer scheme.
  const client = createClient(createConfig({ baseUrl, ...(bearer === undefined ? {} : { auth: bearer }) }));
  const headers = step.idempotencyKey === undefined ? {} : { "Idempotency-Key": step.idempotencyKey };
  const id = String(step.path["id"]);
  switch (step.op) {
    case "enqueue_one":
      return answer(await enqueueOne({ client, headers, body: step.body as EnqueueRequest }));
    case "enqueue_batch":
      return answer(await enqueueBatch({ client, headers, body: step.body as BatchRequest }));
    case "list_items":
      return answer(await listItems({ client, query: step.query as ListItemsData["query"] }));
    case "get_item":
      return answer(await getItem({ client, path: { id }, query: step.query as GetItemData["query"] }));
    case "cancel_item":
      return answer(await cancelItem({ client, headers, path: { id }, query: step.query as CancelItemData["query"] }));
    case "retry_item":
      return answer(await retryItem({ client, headers, path: { id }, query: step.query as RetryItemData["query"] }));
    case "bulk":
      return answer(await bulk({ client, headers, body: step.body as BulkRequest }));
    case "stats":
      return answer(await stats({ client }));
    case "openapi_json":
      return answer(await openapiJson({ client }));
    default:
      throw new Error(`operation ${step.op} has no call in this program`);
  }
};

await main(call);
