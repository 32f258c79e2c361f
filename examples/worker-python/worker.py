"""A drover worker in Python, over HTTP, through the client that
openapi-python-client generates from crates/drover-http/openapi.json.

Environment: DROVER_URL (the server), DROVER_TOKEN (a worker token:
`drover token create --role worker --work 'default:drover.*'`),
DROVER_LANES (comma-separated) and DROVER_CAPACITY (items run at once);
optionally DROVER_PREFETCH (items held claimed beyond the free slots;
unset, adaptive), DROVER_CLAIMERS (claims in flight, default 2) and
DROVER_KEEPALIVE=0 (httpx's own transport instead of keepalive.py's).

It claims batches (long-polling when the lanes are empty) into a small
ready buffer, as a native worker does: up to the free slots plus the
prefetch (adaptive: the items it starts in PREFETCH_HORIZON_S), with up to
DROVER_CLAIMERS claims in flight. A claim costs a commit (a WAL flush,
milliseconds), so the items each claim brings set the drain's rate, and
a second claim in flight keeps items coming while the first waits. An
item waits in the buffer at most half its lease, else it is handed back
unstarted. Each item runs as a task; its slot frees when the handler
returns, and what finished rides on the next claim (`complete` on the
claim: one request a round); a task of its own sends completions that no
claim picked up within COMPLETE_AFTER_S (the claims are waiting on empty
lanes). It renews the leases of what it runs every third of the lease,
and on SIGTERM or SIGINT drains: it stops claiming, hands back what it
holds unstarted, finishes what it runs, sends the last completions, says
goodbye (`/stop`) and exits 0. It prints its totals as one JSON line at
the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections import deque
from typing import Any
from uuid import UUID

import httpx

from keepalive import KeepAliveTransport

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
CLAIM_MAX = 1000  # the most items one claim may ask for
PREFETCH_HORIZON_S = 0.05  # the adaptive prefetch holds the items that start in this long
PREFETCH_WINDOW_S = 0.05  # how often it measures the start rate
PREFETCH_MAX_FACTOR = 10  # it never holds more than this many times the capacity


async def handle(kind: str, payload: Any) -> None:
    """The handlers: what the built-in kinds do."""
    if kind == "drover.noop":
        return
    if kind == "drover.sleep" and isinstance(payload, dict) and isinstance(payload.get("ms"), int):
        await asyncio.sleep(payload["ms"] / 1000)
        return
    raise ValueError(f"cannot run {kind} with payload {payload!r}")


class Worker:
    def __init__(self, client: AuthenticatedClient, lanes: list[str], capacity: int,
                 prefetch: int | None, claimers: int) -> None:
        self.client, self.lanes, self.capacity = client, lanes, capacity
        self.claimers = max(1, claimers)
        # A fixed prefetch, or (None) an adaptive one: PREFETCH_HORIZON_S
        # of work at the rate items start, so quick handlers get large
        # claims and slow ones claim only for free slots.
        self.fixed, self.prefetch = prefetch, capacity if prefetch is None else prefetch
        self.window, self.window_starts, self.start_rate = time.monotonic(), 0, 0.0
        self.id = f"py-{socket.gethostname()}-{os.getpid()}"
        self.running: dict[UUID, tuple[ClaimedItem, asyncio.Task[None]]] = {}
        # Claimed, not started: each with the monotonic time it must start by.
        self.ready: deque[tuple[ClaimedItem, float]] = deque()
        self.asked = 0  # items asked for by the claims in flight
        self.handing: set[asyncio.Task[None]] = set()  # releases of items that waited too long
        self.done: list[CompleteEntry] = []
        # room wakes the claimers; settle wakes the completer.
        self.room, self.settle, self.stopping = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.totals = {"completed": 0, "stale": 0, "failed": 0, "released": 0}

    def remeasure(self) -> None:
        elapsed = time.monotonic() - self.window
        if self.fixed is not None or elapsed < PREFETCH_WINDOW_S:
            return
        rate = self.window_starts / elapsed
        self.start_rate = rate if self.start_rate == 0 else 0.7 * self.start_rate + 0.3 * rate
        self.prefetch = min(int(self.start_rate * PREFETCH_HORIZON_S), PREFETCH_MAX_FACTOR * self.capacity)
        self.window, self.window_starts = time.monotonic(), 0

    def wanted(self) -> int:
        """How many items a new claim may ask for: what fills the free slots
        and the ready buffer, less what the claims in flight asked for."""
        return self.capacity + self.prefetch - len(self.running) - len(self.ready) - self.asked

    async def claim_loop(self) -> None:
        while not self.stopping.is_set():
            self.remeasure()
            n = min(self.wanted(), CLAIM_MAX)
            # With a prefetch, a claim asks for half the capacity or more:
            # tiny claims would spend a commit on an item or two.
            if n < max(1, min(self.capacity // 2, self.prefetch)):
                self.room.clear()
                await first(self.room.wait(), self.stopping.wait())
                continue
            carried, self.done = self.done[:1000], self.done[1000:]
            body = ClaimRequest(worker_id=self.id, lanes=self.lanes, kinds=KINDS, max_=n,
                                lease_ms=LEASE_MS, wait_ms=WAIT_MS, capacity=self.capacity,
                                complete=carried)
            self.asked += n
            try:
                answer = await claim.asyncio_detailed(client=self.client, body=body)
            except httpx.TransportError:
                answer = None
            finally:
                self.asked -= n
            if answer is not None and answer.status_code in (400, 401, 403):
                sys.exit(f"claim refused ({answer.status_code}): {answer.content.decode()}")
            if answer is None or not isinstance(answer.parsed, ClaimResponse):
                self.done[:0] = carried  # not written (503, or unknown: a completion lands at most once)
                self.settle.set()
                await asyncio.sleep(1)  # the server drains (503) or is away: claim again later
                continue
            self.totals["completed"] += len(answer.parsed.completed)
            self.totals["stale"] += len(answer.parsed.stale)
            start_by = time.monotonic() + LEASE_MS / 2000
            self.ready.extend((item, start_by) for item in answer.parsed.items)
            self.start_ready()

    def start_ready(self) -> None:
        """Starts buffered items in the free slots; one that waited past half
        its lease is handed back unstarted instead (it could lapse mid-run)."""
        while self.ready and len(self.running) < self.capacity and not self.stopping.is_set():
            item, start_by = self.ready.popleft()
            if time.monotonic() > start_by:
                task = asyncio.create_task(self.hand_back(item, "waited past half its lease"))
                self.handing.add(task)  # held, so the loop cannot drop it unfinished
                task.add_done_callback(self.handing.discard)
            else:
                self.window_starts += 1
                self.running[item.id] = (item, asyncio.create_task(self.run(item)))

    async def hand_back(self, item: ClaimedItem, note: str) -> None:
        try:
            await release.asyncio_detailed(item.id, client=self.client, body=ReleaseRequest(
                tenant_id=item.tenant_id, claim_token=item.claim_token, note=note))
            self.totals["released"] += 1
        except httpx.TransportError:
            pass  # not reached the server: the item comes back when its lease passes

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
            self.start_ready()
            self.room.set()
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
        self.room.set()
        self.settle.set()

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop_soon)
        completer, renewer = asyncio.create_task(self.complete_loop()), asyncio.create_task(self.renew_loop())
        # Each returns once stopping is set and its last claim answered.
        await asyncio.gather(*(self.claim_loop() for _ in range(self.claimers)))
        unstarted = [item for item, _ in self.ready]
        self.ready.clear()
        await asyncio.gather(*(self.hand_back(item, "worker stopping") for item in unstarted), *self.handing)
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
    prefetch = int(os.environ["DROVER_PREFETCH"]) if "DROVER_PREFETCH" in os.environ else None
    claimers = int(os.environ.get("DROVER_CLAIMERS", "2"))
    timeout = httpx.Timeout(WAIT_MS / 1000 + 30)
    connections = capacity + claimers + 4  # the claims, the completer and the per-item writes
    url = os.environ["DROVER_URL"]
    httpx_args: dict[str, Any] = {
        "limits": httpx.Limits(max_connections=connections, max_keepalive_connections=connections)}
    if url.startswith("http://") and os.environ.get("DROVER_KEEPALIVE", "1") != "0":
        httpx_args["transport"] = KeepAliveTransport(url)  # a third of httpx's CPU per request
    client = AuthenticatedClient(base_url=url, token=os.environ["DROVER_TOKEN"],
                                 timeout=timeout, httpx_args=httpx_args)
    async with client:
        await Worker(client, lanes, capacity, prefetch, claimers).main()


if __name__ == "__main__":
    asyncio.run(amain())
    sys.exit(0)
