"""drover's HTTP conformance cases through the Python client that
openapi-python-client generates from crates/drover-http/openapi.json.

Every request goes through the generated client: a typed function per
operation, the request built from the generated models (`from_dict`) and
the answer parsed by the client into its models (read back with
`to_dict`), so a case fails when the client cannot build a request the
server accepts or cannot read an answer the server sends.

Reads DROVER_URL, DROVER_TOKENS (a JSON object: token name -> secret),
DROVER_TENANTS (name -> UUID) and the cases file given as the one argument;
prints a line per case and a summary line, and exits 1 if any case failed.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from drover_client.api.items import (
    bulk,
    cancel_item,
    enqueue_batch,
    enqueue_one,
    get_item,
    list_items,
    retry_item,
)
from drover_client.api.meta import openapi_json
from drover_client.api.operations import stats
from drover_client.client import AuthenticatedClient
from drover_client.models import (
    BatchRequest,
    BulkRequest,
    EnqueueRequest,
    ItemStatus,
    Problem,
)
from drover_client.types import UNSET, Unset

Json = Any


class Dictable(Protocol):
    """A generated model: it writes itself back as JSON."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass
class Answer:
    """What one call answered, as the generated client parsed it."""

    status: int
    headers: dict[str, str]
    parsed: Dictable | None

    def body(self) -> Json:
        return None if self.parsed is None else self.parsed.to_dict()


class CaseFailed(Exception):
    """A step's answer differs from what the case expects."""

    def __init__(self, message: str) -> None:
        super().__init__(message if len(message) <= 600 else message[:600] + "...")


def opt_str(v: Json) -> str | Unset:
    return UNSET if v is None else str(v)


def opt_uuid(v: Json) -> UUID | Unset:
    return UNSET if v is None else UUID(str(v))


def opt_int(v: Json) -> int | Unset:
    return UNSET if v is None else int(v)


def opt_time(v: Json) -> datetime.datetime | Unset:
    return UNSET if v is None else datetime.datetime.fromisoformat(str(v))


def call(op: str, client: AuthenticatedClient, step: dict[str, Json]) -> Answer:
    """One operation through the generated client."""
    path: dict[str, Json] = step.get("path") or {}
    query: dict[str, Json] = step.get("query") or {}
    body: Json = step.get("body")
    key = opt_str(step.get("idempotency_key"))
    if op == "enqueue_one":
        r1 = enqueue_one.sync_detailed(
            client=client, body=EnqueueRequest.from_dict(body), idempotency_key=key
        )
        return Answer(r1.status_code, dict(r1.headers), r1.parsed)
    if op == "enqueue_batch":
        r2 = enqueue_batch.sync_detailed(
            client=client, body=BatchRequest.from_dict(body), idempotency_key=key
        )
        return Answer(r2.status_code, dict(r2.headers), r2.parsed)
    if op == "list_items":
        status = query.get("status")
        r3 = list_items.sync_detailed(
            client=client,
            status=UNSET if status is None else ItemStatus(status),
            lane=opt_str(query.get("lane")),
            kind=opt_str(query.get("kind")),
            group=opt_str(query.get("group")),
            tenant=opt_uuid(query.get("tenant")),
            key=opt_str(query.get("key")),
            created_after=opt_time(query.get("created_after")),
            created_before=opt_time(query.get("created_before")),
            error=opt_str(query.get("error")),
            cursor=opt_str(query.get("cursor")),
            limit=opt_int(query.get("limit")),
        )
        return Answer(r3.status_code, dict(r3.headers), r3.parsed)
    if op == "get_item":
        r4 = get_item.sync_detailed(
            UUID(path["id"]), client=client, tenant=opt_uuid(query.get("tenant"))
        )
        return Answer(r4.status_code, dict(r4.headers), r4.parsed)
    if op == "cancel_item":
        r5 = cancel_item.sync_detailed(
            UUID(path["id"]),
            client=client,
            tenant=opt_uuid(query.get("tenant")),
            idempotency_key=key,
        )
        return Answer(r5.status_code, dict(r5.headers), r5.parsed)
    if op == "retry_item":
        r6 = retry_item.sync_detailed(
            UUID(path["id"]),
            client=client,
            tenant=opt_uuid(query.get("tenant")),
            idempotency_key=key,
        )
        return Answer(r6.status_code, dict(r6.headers), r6.parsed)
    if op == "bulk":
        r7 = bulk.sync_detailed(
            client=client, body=BulkRequest.from_dict(body), idempotency_key=key
        )
        return Answer(r7.status_code, dict(r7.headers), r7.parsed)
    if op == "stats":
        r8 = stats.sync_detailed(client=client)
        return Answer(r8.status_code, dict(r8.headers), r8.parsed)
    if op == "openapi_json":
        r9 = openapi_json.sync_detailed(client=client)
        return Answer(r9.status_code, dict(r9.headers), r9.parsed)
    raise CaseFailed(f"operation {op!r} has no call in this driver")


VAR = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")


def subst(v: Json, saved: dict[str, Json]) -> Json:
    """The case's value with `${name}` replaced by what was saved and
    `{"$repeat": n, "item": x}` by n copies of x."""
    if isinstance(v, str):
        m = VAR.match(v)
        if m:
            if m.group(1) not in saved:
                raise CaseFailed(f"nothing saved as {m.group(1)!r}")
            return saved[m.group(1)]
        return v
    if isinstance(v, list):
        return [subst(x, saved) for x in v]
    if isinstance(v, dict):
        if "$repeat" in v:
            return [subst(v["item"], saved) for _ in range(int(v["$repeat"]))]
        return {k: subst(x, saved) for k, x in v.items()}
    return v


def pick(v: Json, path: str) -> Json:
    """The value at a dotted path; `*` collects over an array."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part == "*":
            rest = ".".join(parts[i + 1 :])
            return [pick(x, rest) if rest else x for x in v]
        v = v[int(part)] if isinstance(v, list) else v[part]
    return v


def match(expected: Json, actual: Json, at: str) -> None:
    """Raises unless `actual` matches `expected` (objects: the members
    named, `$absent`, `$len`, `$min`; arrays: same length, each matched)."""
    if isinstance(expected, dict):
        if "$len" in expected:
            if not isinstance(actual, list) or len(actual) != expected["$len"]:
                n = len(actual) if isinstance(actual, list) else actual
                raise CaseFailed(f"{at}: expected {expected['$len']} elements, got {n}")
            return
        if "$min" in expected:
            if not isinstance(actual, (int, float)) or actual < expected["$min"]:
                raise CaseFailed(f"{at}: expected at least {expected['$min']}, got {actual!r}")
            return
        if not isinstance(actual, dict):
            raise CaseFailed(f"{at}: expected an object, got {actual!r}")
        for k, want in expected.items():
            if isinstance(want, dict) and want.get("$absent"):
                if k in actual:
                    raise CaseFailed(f"{at}.{k}: expected absent, got {actual[k]!r}")
                continue
            if k not in actual:
                raise CaseFailed(f"{at}.{k}: missing")
            match(want, actual[k], f"{at}.{k}")
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise CaseFailed(f"{at}: expected {expected!r}, got {actual!r}")
        for i, (w, a) in enumerate(zip(expected, actual)):
            match(w, a, f"{at}[{i}]")
        return
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        raise CaseFailed(f"{at}: expected {expected!r}, got {actual!r}")


def check(answer: Answer, expect: dict[str, Json], saved: dict[str, Json]) -> None:
    want = subst(expect, saved)
    if answer.status != want["status"]:
        raise CaseFailed(f"status {answer.status}, expected {want['status']}: {answer.body()!r}")
    if want.get("problem"):
        ctype = answer.headers.get("content-type", "")
        if not isinstance(answer.parsed, Problem) or ctype != "application/problem+json":
            raise CaseFailed(f"expected a problem, got {ctype!r} {answer.parsed!r}")
    for name, value in (want.get("headers") or {}).items():
        if answer.headers.get(name) != value:
            raise CaseFailed(f"header {name}: {answer.headers.get(name)!r}, expected {value!r}")
    if "body" in want:
        match(want["body"], answer.body(), "body")


def paginate(
    op: str, client: AuthenticatedClient, step: dict[str, Json], saved: dict[str, Json]
) -> None:
    """Follows next_cursor to the end: the page sizes and the ids seen."""
    want = subst(step["paginate"], saved)
    query = dict(step.get("query") or {})
    sizes: list[int] = []
    seen: list[str] = []
    while True:
        answer = call(op, client, {**step, "query": query})
        if answer.status != 200:
            raise CaseFailed(f"page {len(sizes) + 1}: status {answer.status}: {answer.body()!r}")
        page = answer.body()
        sizes.append(len(page["items"]))
        seen.extend(str(item["id"]) for item in page["items"])
        if "next_cursor" not in page:
            break
        if len(sizes) > len(want["pages"]):
            raise CaseFailed(f"more pages than {want['pages']}: {sizes}")
        query["cursor"] = page["next_cursor"]
    if sizes != want["pages"]:
        raise CaseFailed(f"page sizes {sizes}, expected {want['pages']}")
    if len(set(seen)) != len(seen) or set(seen) != {str(i) for i in want["ids"]}:
        raise CaseFailed(f"ids seen differ from the ids expected: {seen}")


def run_case(
    case: dict[str, Json], clients: dict[str | None, AuthenticatedClient], base: str
) -> None:
    saved: dict[str, Json] = {f"tenant.{k}": v for k, v in TENANTS.items()}
    for i, raw in enumerate(case["steps"]):
        step = {k: (v if k in ("expect", "paginate") else subst(v, saved)) for k, v in raw.items()}
        token = step.get("token")
        client = clients.get(token) or bearer(base, str(token))
        try:
            if "paginate" in step:
                paginate(step["op"], client, step, saved)
                continue
            answer = call(step["op"], client, step)
            check(answer, step["expect"], saved)
            for name, path in (step.get("save") or {}).items():
                saved[name] = pick(answer.body(), path)
        except CaseFailed as e:
            raise CaseFailed(f"step {i + 1} ({step['op']}): {e}") from None


def bearer(base: str, token: str) -> AuthenticatedClient:
    return AuthenticatedClient(base_url=base, token=token)


TENANTS: dict[str, str] = json.loads(os.environ.get("DROVER_TENANTS", "{}"))


def main() -> int:
    base = os.environ["DROVER_URL"]
    tokens: dict[str, str] = json.loads(os.environ["DROVER_TOKENS"])
    with open(sys.argv[1], encoding="utf-8") as f:
        cases: list[dict[str, Json]] = json.load(f)["cases"]
    clients: dict[str | None, AuthenticatedClient] = {
        name: bearer(base, secret) for name, secret in tokens.items()
    }
    # No token at all: the generated client always sends its auth header,
    # so this one sends it under a name the server does not read.
    clients[None] = AuthenticatedClient(base_url=base, token="", prefix="", auth_header_name="X-No-Token")
    passed = 0
    for case in cases:
        try:
            run_case(case, clients, base)
            passed += 1
            print(f"PASS {case['name']}")
        except CaseFailed as e:
            print(f"FAIL {case['name']}: {e}")
        except Exception:  # a client that raised: the case fails, the run goes on
            print(f"FAIL {case['name']}: the client raised\n{traceback.format_exc()}")
    print(f"conformance: {passed} passed, {len(cases) - passed} failed of {len(cases)}")
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
