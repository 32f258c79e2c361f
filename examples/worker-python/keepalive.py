"""A small HTTP/1.1 transport for httpx, under the generated client: one
keep-alive connection per request in flight, each request written in one
piece, the answer read by its Content-Length (or chunks).

Why: a worker's claims are small requests on loopback or a LAN, and in a
drain its CPU per request, not the network, bounds it. Through httpx's
default transport (httpcore over anyio and h11) a request cost 1.8-2.0 ms
of CPU on a loaded test machine, its head and body written apart; through
this one 0.54-0.75 ms (the rest is httpx's client and the generated
code). The generated client still builds every request and parses every
answer; only the bytes on the wire move here. Plain `http://` only (a
worker behind TLS keeps httpx's transport: DROVER_KEEPALIVE=0).
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx


class KeepAliveTransport(httpx.AsyncBaseTransport):
    def __init__(self, base_url: str) -> None:
        url = urlsplit(base_url)
        if url.scheme != "http" or url.hostname is None:
            raise ValueError(f"{base_url!r}: the keep-alive transport speaks plain http:// only")
        self.host, self.port = url.hostname, url.port or 80
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self.idle:
            reader, writer = self.idle.pop()
            # Closed by the server while idle: its FIN has been read.
            if not (reader.at_eof() or writer.is_closing()):
                return reader, writer
            writer.close()
        return await asyncio.open_connection(self.host, self.port)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        head = [f"{request.method} {request.url.raw_path.decode('ascii')} HTTP/1.1",
                f"host: {self.host}:{self.port}", f"content-length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in request.headers.items()
                 if k.lower() not in ("host", "content-length", "transfer-encoding")]
        wait = request.extensions.get("timeout", {}).get("read")
        try:
            reader, writer = await self.connection()
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            async with asyncio.timeout(wait):
                status, headers, content = await read_response(reader)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            raise httpx.ReadError(f"{type(e).__name__}: {e}", request=request) from e
        except TimeoutError as e:
            raise httpx.ReadTimeout("no answer in time", request=request) from e
        if dict(headers).get("connection", "").lower() == "close":
            writer.close()
        else:
            self.idle.append((reader, writer))
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def aclose(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]], bytes]:
    lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = [(k.strip().lower(), v.strip()) for k, v in
               (line.split(":", 1) for line in lines[1:] if line)]
    fields = dict(headers)
    if "content-length" in fields:
        return status, headers, await reader.readexactly(int(fields["content-length"]))
    if fields.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")  # the last chunk's end (no trailers are sent)
        return status, headers, b"".join(chunks)
    if status in (204, 304) or 100 <= status < 200:
        return status, headers, b""
    raise ValueError("an answer without Content-Length or chunks")
