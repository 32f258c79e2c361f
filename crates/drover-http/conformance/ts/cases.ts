// The conformance cases' engine for the TypeScript clients: reads the
// cases file, substitutes saved values, calls each step's operation through
// the client a program hands it (`Call`), and matches the answers. The
// programs (openapi-fetch.ts, hey-api.ts) own the calls: each goes through
// a client generated from crates/drover-http/openapi.json at test time.
//
// Reads DROVER_URL, DROVER_TOKENS (token name -> secret), DROVER_TENANTS
// (name -> UUID) and the cases file named by the first argument; prints a
// line per case and a summary, and exits 1 if any case failed.

import { readFileSync } from "node:fs";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Obj = { [k: string]: Json };

/** One step of a case, its `${...}` values substituted. */
export interface Step {
  op: string;
  token: string | null;
  path: Obj;
  query: Obj;
  body: Json;
  idempotencyKey: string | undefined;
}

/** What one call answered, as the generated client handed it back. */
export interface Answer {
  status: number;
  headers: Headers;
  /** The client's `data` (success) or `error` (problem) member. */
  body: unknown;
  /** True when the client put the answer in its error member. */
  error: boolean;
}

/** One operation through a generated client; `bearer` is undefined for no token. */
export type Call = (step: Step, bearer: string | undefined) => Promise<Answer>;

class CaseFailed extends Error {}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function asObj(v: unknown): Obj {
  return isObj(v) ? v : {};
}

const VAR = /^\$\{([A-Za-z0-9_.]+)\}$/;

function subst(v: Json, saved: Map<string, Json>): Json {
  if (typeof v === "string") {
    const m = VAR.exec(v);
    if (m === null) return v;
    const name = m[1] ?? "";
    const got = saved.get(name);
    if (got === undefined) throw new CaseFailed(`nothing saved as ${name}`);
    return got;
  }
  if (Array.isArray(v)) return v.map((x) => subst(x, saved));
  if (isObj(v)) {
    const n = v["$repeat"];
    if (typeof n === "number") {
      const item = v["item"] ?? null;
      return Array.from({ length: n }, () => subst(item, saved));
    }
    const out: Obj = {};
    for (const [k, x] of Object.entries(v)) out[k] = subst(x, saved);
    return out;
  }
  return v;
}

function pick(v: unknown, path: string): Json {
  const parts = path.split(".");
  let cur: unknown = v;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? "";
    if (part === "*") {
      const rest = parts.slice(i + 1).join(".");
      if (!Array.isArray(cur)) throw new CaseFailed(`${path}: not an array`);
      return cur.map((x: unknown) => (rest ? pick(x, rest) : (x as Json)));
    }
    cur = Array.isArray(cur) ? (cur as unknown[])[Number(part)] : asObj(cur)[part];
  }
  return cur as Json;
}

/** JSON text of `v`, cut to keep a failure line readable. */
function show(v: unknown): string {
  const text = JSON.stringify(v) ?? "undefined";
  return text.length > 400 ? `${text.slice(0, 400)}...` : text;
}

function match(expected: Json, actual: unknown, at: string): void {
  if (isObj(expected)) {
    const len = expected["$len"];
    if (typeof len === "number") {
      if (!Array.isArray(actual) || actual.length !== len) {
        throw new CaseFailed(`${at}: expected ${len} elements, got ${show(actual)}`);
      }
      return;
    }
    const min = expected["$min"];
    if (typeof min === "number") {
      if (typeof actual !== "number" || actual < min) {
        throw new CaseFailed(`${at}: expected at least ${min}, got ${show(actual)}`);
      }
      return;
    }
    if (!isObj(actual)) throw new CaseFailed(`${at}: expected an object, got ${show(actual)}`);
    for (const [k, want] of Object.entries(expected)) {
      if (isObj(want) && want["$absent"] === true) {
        if (k in actual) throw new CaseFailed(`${at}.${k}: expected absent, got ${show(actual[k])}`);
        continue;
      }
      if (!(k in actual)) throw new CaseFailed(`${at}.${k}: missing`);
      match(want, actual[k], `${at}.${k}`);
    }
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      throw new CaseFailed(`${at}: expected ${show(expected)}, got ${show(actual)}`);
    }
    expected.forEach((w, i) => match(w, (actual as unknown[])[i], `${at}[${i}]`));
    return;
  }
  if (expected !== actual) throw new CaseFailed(`${at}: expected ${show(expected)}, got ${show(actual)}`);
}

function check(answer: Answer, expect: Obj): void {
  if (answer.status !== expect["status"]) {
    throw new CaseFailed(`status ${answer.status}, expected ${show(expect["status"])}: ${show(answer.body)}`);
  }
  if (expect["problem"] === true) {
    const ctype = answer.headers.get("content-type");
    if (!answer.error || ctype !== "application/problem+json") {
      throw new CaseFailed(`expected a problem, got ${show(ctype)} ${show(answer.body)}`);
    }
  }
  for (const [name, value] of Object.entries(asObj(expect["headers"]))) {
    if (answer.headers.get(name) !== value) {
      throw new CaseFailed(`header ${name}: ${show(answer.headers.get(name))}, expected ${show(value)}`);
    }
  }
  if ("body" in expect) match(expect["body"] ?? null, answer.body, "body");
}

async function paginate(call: Call, step: Step, bearer: string | undefined, want: Obj): Promise<void> {
  const query: Obj = { ...step.query };
  const sizes: number[] = [];
  const seen: string[] = [];
  const pages = Array.isArray(want["pages"]) ? want["pages"] : [];
  for (;;) {
    const answer = await call({ ...step, query: { ...query } }, bearer);
    if (answer.status !== 200) {
      throw new CaseFailed(`page ${sizes.length + 1}: status ${answer.status}: ${show(answer.body)}`);
    }
    const page = asObj(answer.body);
    const items = Array.isArray(page["items"]) ? page["items"] : [];
    sizes.push(items.length);
    for (const item of items) seen.push(String(asObj(item)["id"]));
    const next = page["next_cursor"];
    if (next === undefined) break;
    if (sizes.length > pages.length) throw new CaseFailed(`more pages than ${show(pages)}: ${show(sizes)}`);
    query["cursor"] = next;
  }
  if (show(sizes) !== show(pages)) throw new CaseFailed(`page sizes ${show(sizes)}, expected ${show(pages)}`);
  const ids = new Set((Array.isArray(want["ids"]) ? want["ids"] : []).map(String));
  const got = new Set(seen);
  if (got.size !== seen.length || got.size !== ids.size || [...got].some((id) => !ids.has(id))) {
    throw new CaseFailed(`ids seen differ from the ids expected: ${show(seen)}`);
  }
}

async function runCase(call: Call, c: Obj, tokens: Obj, tenants: Obj): Promise<void> {
  const saved = new Map<string, Json>();
  for (const [k, v] of Object.entries(tenants)) saved.set(`tenant.${k}`, v);
  const steps = Array.isArray(c["steps"]) ? c["steps"] : [];
  for (const [i, raw] of steps.entries()) {
    const s = asObj(raw);
    const op = String(s["op"]);
    try {
      const token = s["token"] ?? null;
      const secret = typeof token === "string" ? (tokens[token] ?? token) : undefined;
      const key = s["idempotency_key"];
      const step: Step = {
        op,
        token: typeof token === "string" ? token : null,
        path: asObj(subst(s["path"] ?? {}, saved)),
        query: asObj(subst(s["query"] ?? {}, saved)),
        body: subst(s["body"] ?? null, saved),
        idempotencyKey: typeof key === "string" ? key : undefined,
      };
      const bearer = typeof secret === "string" ? secret : undefined;
      if (s["paginate"] !== undefined) {
        await paginate(call, step, bearer, asObj(subst(s["paginate"], saved)));
        continue;
      }
      const answer = await call(step, bearer);
      check(answer, asObj(subst(s["expect"] ?? {}, saved)));
      for (const [name, path] of Object.entries(asObj(s["save"]))) saved.set(name, pick(answer.body, String(path)));
    } catch (e) {
      if (e instanceof CaseFailed) throw new CaseFailed(`step ${i + 1} (${op}): ${e.message}`);
      throw e;
    }
  }
}

/** Runs every case through `call`; the process's exit status says whether all passed. */
export async function main(call: Call): Promise<void> {
  const file = process.argv[2];
  if (file === undefined) throw new Error("usage: node <program>.js cases.json");
  const cases = asObj(JSON.parse(readFileSync(file, "utf8")) as Json)["cases"];
  const tokens = asObj(JSON.parse(process.env["DROVER_TOKENS"] ?? "{}") as Json);
  const tenants = asObj(JSON.parse(process.env["DROVER_TENANTS"] ?? "{}") as Json);
  const list = Array.isArray(cases) ? cases : [];
  let passed = 0;
  for (const raw of list) {
    const c = asObj(raw);
    try {
      await runCase(call, c, tokens, tenants);
      passed++;
      console.log(`PASS ${String(c["name"])}`);
    } catch (e) {
      const why = e instanceof CaseFailed ? e.message : `the client threw: ${e instanceof Error ? e.stack : String(e)}`;
      console.log(`FAIL ${String(c["name"])}: ${why}`);
    }
  }
  console.log(`conformance: ${passed} passed, ${list.length - passed} failed of ${list.length}`);
  process.exitCode = passed === list.length ? 0 : 1;
}
