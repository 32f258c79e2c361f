"""A drover worker in Python, over HTTP, through the client that
openapi-python-client generates from crates/drover-http/openapi.json.

Environment: DROVER_URL (the server), DROVER_TOKEN (a worker token:
`drover token create --role worker --work 'default:drover.*'`),
DROVER_LANES (comma-separated) and DROVER_CAPACITY (items run at once).

It claims batches (up to its free slots, long-polling when the lanes are
empty), runs each item as a task, frees the slot when the handler returns,
and sends what finished with its next claim (`complete` on the claim: one
request a round); a task of its own sends completions that no claim picked
up within COMPLETE_AFTER_S (the claim is waiting on an empty lane). It
renews the leases of what it runs every third of the lease, and on SIGTERM
or SIGINT drains: it stops claiming, finishes what it runs, sends the last
completions, says goodbye (`/stop`) and exits 0. It prints its totals as
one JSON line at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from typing import Any
from uuid import UUID

import httpx

from drover_client.api.work import claim, complete_batch, fail, release, renew, stop
from drover_client.client import AuthenticatedClient
from drover_client.models import (
    ClaimedItem,
    ClaimRequest,
    ClaimResponse,
    CompleteBatch,
    CompletedBatch,
    CompleteEntry,
    FailRequest,
    ReleaseRequest,
    RenewRequest,
)

KINDS = ["drover.noop", "drover.sleep"]
LEASE_MS = 30_000
WAIT_MS = 2_000  # a long poll's longest wait, and so the longest drain of an idle worker
COMPLETE_AFTER_S = 0.05  # how long a finished item waits for a claim to carry it


async def handle(kind: str, payload: Any) -> None:
    """The handlers: what the built-in kinds do."""
    if kind == "drover.noop":
        return
    if kind == "drover.sleep" and isinstance(payload, dict) and isinstance(payload.get("ms"), int):
        await asyncio.sleep(payload["ms"] / 1000)
        return
    raise ValueError(f"cannot run {kind} with payload {payload!r}")


class Worker:
    def __init__(self, client: AuthenticatedClient, lanes: list[str], capacity: int) -> None:
        self.client, self.lanes, self.capacity = client, lanes, capacity
        self.id = f"py-{socket.gethostname()}-{os.getpid()}"
        self.running: dict[UUID, tuple[ClaimedItem, asyncio.Task[None]]] = {}
        self.done: list[CompleteEntry] = []
        # slot_freed wakes the claimer; settle wakes the completer.
        self.slot_freed, self.settle, self.stopping = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.totals = {"completed": 0, "stale": 0, "failed": 0, "released": 0}

    async def claim_loop(self) -> None:
        while not self.stopping.is_set():
            free = self.capacity - len(self.running)
            if free == 0:
                self.slot_freed.clear()
                await first(self.slot_freed.wait(), self.stopping.wait())
                continue
            carried, self.done = self.done[:1000], self.done[1000:]
            body = ClaimRequest(worker_id=self.id, lanes=self.lanes, kinds=KINDS, max_=free,
                                lease_ms=LEASE_MS, wait_ms=WAIT_MS, capacity=self.capacity,
                                complete=carried)
            try:
                answer = await claim.asyncio_detailed(client=self.client, body=body)
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code in (400, 401, 403):
                sys.exit(f"claim refused ({answer.status_code}): {answer.content.decode()}")
            if answer is None or not isinstance(answer.parsed, ClaimResponse):
                self.done[:0] = carried  # not written (503, or unknown: a completion lands at most once)
                self.settle.set()
                await asyncio.sleep(1)  # the server drains (503) or is away: claim again later
                continue
            self.totals["completed"] += len(answer.parsed.completed)
            self.totals["stale"] += len(answer.parsed.stale)
            for item in answer.parsed.items:
                if self.stopping.is_set():  # claimed as the drain began: hand it back unstarted
                    await release.asyncio_detailed(item.id, client=self.client, body=ReleaseRequest(
                        tenant_id=item.tenant_id, claim_token=item.claim_token, note="worker stopping"))
                    self.totals["released"] += 1
                else:
                    self.running[item.id] = (item, asyncio.create_task(self.run(item)))

    async def run(self, item: ClaimedItem) -> None:
        try:
            await handle(item.kind, item.payload)
            self.done.append(CompleteEntry(id=item.id, tenant_id=item.tenant_id, claim_token=item.claim_token))
        except asyncio.CancelledError:  # the lease is gone (a renewal answered 409): write nothing
            pass
        except Exception as e:
            await fail.asyncio_detailed(item.id, client=self.client, body=FailRequest(
                tenant_id=item.tenant_id, claim_token=item.claim_token, error=repr(e)[:4000]))
            self.totals["failed"] += 1
        finally:
            del self.running[item.id]
            self.slot_freed.set()
            self.settle.set()

    async def complete_loop(self) -> None:
        """Sends what finished and no claim carried, a batch at a time, until
        the drain has sent the last."""
        while not (self.stopping.is_set() and not self.running and not self.done):
            if not self.done:
                self.settle.clear()
                await self.settle.wait()
                continue
            if not self.stopping.is_set():
                await asyncio.sleep(COMPLETE_AFTER_S)  # the next claim usually carries them
                if not self.done:
                    continue
            batch, self.done = self.done[:1000], self.done[1000:]
            try:
                answer = await complete_batch.asyncio_detailed(client=self.client, body=CompleteBatch(items=batch))
            except httpx.TransportError:
                answer = None
            if answer is None or not isinstance(answer.parsed, CompletedBatch):
                self.done[:0] = batch  # sent again later: a completion lands at most once
                await asyncio.sleep(1)
                continue
            self.totals["completed"] += len(answer.parsed.completed)
            self.totals["stale"] += len(answer.parsed.stale)

    async def renew_loop(self) -> None:
        while True:
            await asyncio.sleep(LEASE_MS / 3000)
            held = list(self.running.values())
            answers = await asyncio.gather(*(renew.asyncio_detailed(item.id, client=self.client, body=RenewRequest(
                tenant_id=item.tenant_id, claim_token=item.claim_token, lease_ms=LEASE_MS)) for item, _ in held),
                return_exceptions=True)
            for (item, task), answer in zip(held, answers):
                if isinstance(answer, BaseException):
                    continue  # not reached the server: the next round tries again
                if answer.status_code == 409:
                    task.cancel()  # no longer ours: stop the run

    def stop_soon(self) -> None:
        self.stopping.set()
        self.settle.set()

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop_soon)
        completer, renewer = asyncio.create_task(self.complete_loop()), asyncio.create_task(self.renew_loop())
        await self.claim_loop()  # returns once stopping is set and the last claim answered
        await asyncio.gather(*(task for _, task in list(self.running.values())))
        await completer
        renewer.cancel()
        await stop.asyncio_detailed(self.id, client=self.client)
        print(json.dumps({"worker_id": self.id, **self.totals}), flush=True)


async def first(*waits: Any) -> None:
    """Waits for the first of `waits` and cancels the rest."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for t in pending:
        t.cancel()


async def amain() -> None:
    lanes = [lane for lane in os.environ.get("DROVER_LANES", "default").split(",") if lane]
    capacity = int(os.environ.get("DROVER_CAPACITY", "20"))
    timeout = httpx.Timeout(WAIT_MS / 1000 + 30)
    limits = httpx.Limits(max_connections=capacity + 4, max_keepalive_connections=capacity + 4)
    client = AuthenticatedClient(base_url=os.environ["DROVER_URL"], token=os.environ["DROVER_TOKEN"],
                                 timeout=timeout, httpx_args={"limits": limits})
    async with client:
        await Worker(client, lanes, capacity).main()


if __name__ == "__main__":
    asyncio.run(amain())
    sys.exit(0)
