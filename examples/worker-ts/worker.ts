// A drover worker in TypeScript, over HTTP, through openapi-fetch and the
// types openapi-typescript generates from crates/drover-http/openapi.json.
//
// Environment: DROVER_URL (the server), DROVER_TOKEN (a worker token:
// `drover token create --role worker --work 'default:drover.*'`),
// DROVER_LANES (comma-separated) and DROVER_CAPACITY (items run at once).
//
// It claims batches (up to its free slots, long-polling when the lanes are
// empty), runs each item, frees the slot when the handler returns and
// completes in batches from a loop of its own, renews the leases of what it
// runs every third of the lease, and on SIGTERM or SIGINT drains: it stops
// claiming, finishes what it runs, sends the last completions, says goodbye
// (`/stop`) and exits 0. It prints its totals as one JSON line at the end.

import { hostname } from "node:os";
import createClient from "openapi-fetch";

import type { components, paths } from "./generated/schema.js";

type Item = components["schemas"]["ClaimedItem"];
type Entry = components["schemas"]["CompleteEntry"];

const KINDS = ["drover.noop", "drover.sleep"];
const LEASE_MS = 30_000;
const WAIT_MS = 2_000; // a long poll's longest wait, and so the longest drain of an idle worker

const env = (name: string, fallback?: string): string => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const lanes = env("DROVER_LANES", "default").split(",").filter((l) => l !== "");
const capacity = Number.parseInt(env("DROVER_CAPACITY", "20"), 10);
const workerId = `ts-${hostname()}-${process.pid}`;
const client = createClient<paths>({
  baseUrl: env("DROVER_URL"),
  headers: { Authorization: `Bearer ${env("DROVER_TOKEN")}` },
});
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The handlers: what the built-in kinds do. */
async function handle(kind: string, payload: unknown): Promise<void> {
  if (kind === "drover.noop") return;
  if (kind === "drover.sleep" && typeof payload === "object" && payload !== null && "ms" in payload) {
    const ms = payload.ms;
    if (typeof ms === "number") return sleep(ms);
  }
  throw new Error(`cannot run ${kind} with payload ${JSON.stringify(payload)}`);
}

/** A wake-up: `wait()` resolves at the next `set()` (or at once if one came since the last wait). */
class Wake {
  private pending = false;
  private resolvers: (() => void)[] = [];
  set(): void {
    this.pending = true;
    for (const r of this.resolvers.splice(0)) r();
  }
  async wait(): Promise<void> {
    if (!this.pending) await new Promise<void>((r) => this.resolvers.push(r));
    this.pending = false;
  }
}

const running = new Map<string, { item: Item; abort: AbortController; done: Promise<void> }>();
let done: Entry[] = [];
let stopping = false;
const slotFreed = new Wake(); // wakes the claimer
const settle = new Wake(); // wakes the completer
const totals = { completed: 0, stale: 0, failed: 0, released: 0 };

async function claimLoop(): Promise<void> {
  while (!stopping) {
    const free = capacity - running.size;
    if (free === 0) {
      await slotFreed.wait();
      continue;
    }
    const body = { worker_id: workerId, lanes, kinds: KINDS, max: free, lease_ms: LEASE_MS, wait_ms: WAIT_MS, capacity };
    const answer = await client.POST("/v1/work/claim", { body }).catch(() => undefined);
    if (answer !== undefined && [400, 401, 403].includes(answer.response.status)) {
      throw new Error(`claim refused (${answer.response.status}): ${JSON.stringify(answer.error)}`);
    }
    if (answer?.data === undefined) {
      await sleep(1000); // the server drains (503) or is away: claim again later
      continue;
    }
    for (const item of answer.data.items) {
      if (stopping) {
        // Claimed as the drain began: hand it back unstarted.
        const ids = { tenant_id: item.tenant_id, claim_token: item.claim_token, note: "worker stopping" };
        await client.POST("/v1/work/items/{id}/release", { params: { path: { id: item.id } }, body: ids });
        totals.released += 1;
      } else {
        const abort = new AbortController();
        running.set(item.id, { item, abort, done: run(item, abort.signal) });
      }
    }
  }
}

async function run(item: Item, aborted: AbortSignal): Promise<void> {
  await Promise.resolve(); // registered in `running` before it ends
  const ids = { tenant_id: item.tenant_id, claim_token: item.claim_token };
  try {
    await handle(item.kind, item.payload);
    // A renewal that answered 409 means the item is no longer ours: write nothing.
    if (!aborted.aborted) done.push({ id: item.id, ...ids });
  } catch (e) {
    const error = String(e).slice(0, 4000);
    await client.POST("/v1/work/items/{id}/fail", { params: { path: { id: item.id } }, body: { ...ids, error, retryable: true } });
    totals.failed += 1;
  } finally {
    running.delete(item.id);
    slotFreed.set();
    settle.set();
  }
}

/** Sends what finished, a batch at a time, until the drain has sent the last. */
async function completeLoop(): Promise<void> {
  while (!(stopping && running.size === 0 && done.length === 0)) {
    if (done.length === 0) {
      await settle.wait();
      continue;
    }
    const batch = done.slice(0, 1000);
    done = done.slice(1000);
    const answer = await client.POST("/v1/work/complete", { body: { items: batch } }).catch(() => undefined);
    if (answer?.data === undefined) {
      done = batch.concat(done); // sent again later: a completion lands at most once
      await sleep(1000);
      continue;
    }
    totals.completed += answer.data.completed.length;
    totals.stale += answer.data.stale.length;
  }
}

async function renewAll(): Promise<void> {
  await Promise.all(
    [...running.values()].map(async ({ item, abort }) => {
      const body = { tenant_id: item.tenant_id, claim_token: item.claim_token, lease_ms: LEASE_MS };
      const answer = await client
        .POST("/v1/work/items/{id}/renew", { params: { path: { id: item.id } }, body })
        .catch(() => undefined); // not reached the server: the next round tries again
      if (answer?.response.status === 409) abort.abort(); // no longer ours
    }),
  );
}

async function main(): Promise<void> {
  const stop = () => {
    stopping = true;
    slotFreed.set();
    settle.set();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  const renewer = setInterval(() => void renewAll(), LEASE_MS / 3);
  const completer = completeLoop();
  await claimLoop(); // returns once stopping is set and the last claim answered
  await Promise.all([...running.values()].map((r) => r.done));
  await completer;
  clearInterval(renewer);
  await client.POST("/v1/work/workers/{id}/stop", { params: { path: { id: workerId } } });
  console.log(JSON.stringify({ worker_id: workerId, ...totals }));
}

await main();
