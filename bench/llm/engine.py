#!/usr/bin/env python3
"""chring-llm-sim: an LLM inference engine simulator with the shape of vLLM (docs/llm.md).

Written for this project, standard library only.  It serves the OpenAI API
(POST /v1/completions, POST /v1/chat/completions, plain JSON or "stream": true as server-sent
events), GET /v1/models, GET /health and GET /metrics (Prometheus text with vLLM's names), and
models what matters to a router in front of it:

  - continuous batching: at most --max-num-seqs requests run, the rest wait in a FIFO queue;
  - a KV cache of --kv-blocks blocks of 16 tokens (a token is 4 bytes of prompt text), with
    prefix caching by chained block hashes (a block's hash is the hash of its parent's hash and
    its own tokens) and LRU eviction of the cached blocks no running request holds;
  - a step time of  base + per_seq * decoding requests + per_token * prefill tokens,  so prefill
    costs per uncached token and decode steps slow down as the batch grows (chunked prefill with a
    token budget per step, --max-batched-tokens);
  - --time-scale S multiplies every modelled time by S, so that a shared machine keeps up.

One process can host several engines (--engines K on K consecutive ports, or --ports a,b,c);
each has its own cache, queue and counters.  The scheduler's lag behind its modelled step times
is measured and exported (sim:step_lag_seconds_*) so the overhead of the simulation itself can
be checked against the times it models.

    python3 bench/llm/engine.py --port 9100 --engines 4 --time-scale 5
"""

import argparse
import asyncio
import collections
import json
import math
import os
import signal
import socket
import sys
import time

BLOCK_TOKENS = 16  # vLLM's default block size
TOKEN_BYTES = 4  # one token stands for 4 bytes of prompt text (docs/llm.md, "The engine simulator")
BLOCK_BYTES = BLOCK_TOKENS * TOKEN_BYTES

# Buckets of vLLM's vllm:time_to_first_token_seconds histogram.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)

MAX_HEADER_BYTES = 65536
MAX_BODY_BYTES = 64 << 20


class BadRequest(Exception):
    def __init__(self, status, message, kind="BadRequestError"):
        super().__init__(message)
        self.status = status
        self.kind = kind


def canonical_prompt(body, chat):
    """The prompt's text as the engine (and chring-lb's --key prompt) sees it: the prompt string
    for completions; for chat, each message's role, a newline, its text and a newline."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest(400, "'messages' must be a non-empty list")
        parts = []
        for m in messages:
            if not isinstance(m, dict):
                raise BadRequest(400, "every message must be an object")
            role = m.get("role", "")
            content = m.get("content", "")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content
                                  if isinstance(p, dict) and p.get("type") == "text"
                                  and isinstance(p.get("text"), str))
            if not isinstance(role, str) or not isinstance(content, str):
                raise BadRequest(400, "a message's role and content must be text")
            parts.append(role + "\n" + content + "\n")
        return "".join(parts).encode("utf-8", "surrogatepass"), None
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if not prompt:
            raise BadRequest(400, "'prompt' must not be empty")
        if all(isinstance(t, int) for t in prompt):
            text = "".join("%d " % t for t in prompt).encode()
            return text, len(prompt)
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise BadRequest(400, "'prompt' must be a string, a list of strings or of token ids")
    return prompt.encode("utf-8", "surrogatepass"), None


class Request:
    __slots__ = ("rid", "chat", "stream", "include_usage", "model", "prompt_tokens", "max_tokens",
                 "hashes", "hit_blocks", "owned", "anon", "to_prefill", "generated", "writer",
                 "done", "arrival", "first_token_at", "framing", "prefix", "suffix", "aborted",
                 "admitted", "reader")

    def __init__(self):
        self.owned = []
        self.anon = 0
        self.generated = 0
        self.first_token_at = None
        self.aborted = False
        self.admitted = False


class Engine:
    """One simulated engine: a scheduler task, its KV cache, its queue and its counters."""

    def __init__(self, args, port):
        self.args = args
        self.port = port
        self.model = args.model
        self.scale = args.time_scale
        self.blocks = args.kv_blocks
        self.max_num_seqs = args.max_num_seqs
        self.budget = args.max_batched_tokens
        # The KV cache: cached blocks by hash with their reference counts; the cached blocks no
        # request holds, least recently used first; blocks neither held nor cached.
        self.cache = {}
        self.lru = collections.OrderedDict()
        self.free_anon = self.blocks
        self.waiting = collections.deque()
        self.running = []
        self.wake = asyncio.Event()
        self.seq = 0
        # Counters, with vLLM's meanings.
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.success = 0
        self.aborted_total = 0
        self.ttft_counts = [0] * (len(TTFT_BUCKETS) + 1)
        self.ttft_sum = 0.0
        self.ttft_count = 0
        self.e2e_sum = 0.0
        # The simulation's own overhead: how late each step ended against its modelled end.
        self.steps = 0
        self.lag_sum = 0.0
        self.lag_max = 0.0
        self.modelled_sum = 0.0
        self.busy_wall = 0.0

    # ---- the KV cache -------------------------------------------------------------------

    def used_blocks(self):
        return self.blocks - self.free_anon - len(self.lru)

    def block_hashes(self, text, ntokens):
        """Chained hashes of the prompt's full blocks: hash(parent hash, block's tokens)."""
        full = ntokens // BLOCK_TOKENS
        parent = hash(self.model)
        out = []
        for i in range(full):
            parent = hash((parent, text[i * BLOCK_BYTES:(i + 1) * BLOCK_BYTES]))
            out.append(parent)
        return out

    def try_admit(self, r):
        """Takes the KV blocks r needs (its prompt and its whole output) if they are there."""
        # vLLM recomputes at least the prompt's last token: a fully cached prompt hits one block less.
        usable = (r.prompt_tokens - 1) // BLOCK_TOKENS
        hit = 0
        reclaimed = 0
        cache = self.cache
        for h in r.hashes[:usable]:
            ref = cache.get(h)
            if ref is None:
                break
            if ref == 0:
                reclaimed += 1
            hit += 1
        need = -(-(r.prompt_tokens + r.max_tokens) // BLOCK_TOKENS) - hit
        if need > self.free_anon + len(self.lru) - reclaimed:
            return False
        for h in r.hashes[:hit]:
            if cache[h] == 0:
                del self.lru[h]
            cache[h] += 1
        take = min(need, self.free_anon)
        self.free_anon -= take
        for _ in range(need - take):
            h, _ = self.lru.popitem(last=False)
            del cache[h]
        r.owned = list(r.hashes[:hit])
        r.anon = need
        r.hit_blocks = hit
        r.to_prefill = r.prompt_tokens - hit * BLOCK_TOKENS
        r.admitted = True
        self.prefix_queries += r.prompt_tokens
        self.prefix_hits += hit * BLOCK_TOKENS
        self.prompt_tokens_total += r.prompt_tokens
        return True

    def prefill_done(self, r):
        """The prompt's computed full blocks enter the prefix cache."""
        cache = self.cache
        for h in r.hashes[r.hit_blocks:]:
            if h not in cache:
                cache[h] = 1
                r.owned.append(h)
                r.anon -= 1

    def release(self, r):
        """Frees r's blocks; its cached ones become evictable, its last blocks first."""
        cache = self.cache
        for h in reversed(r.owned):
            ref = cache[h] - 1
            cache[h] = ref
            if ref == 0:
                self.lru[h] = None
        r.owned = []
        self.free_anon += r.anon
        r.anon = 0

    # ---- the scheduler ------------------------------------------------------------------

    def submit(self, r):
        self.waiting.append(r)
        self.wake.set()

    async def run(self):
        loop = asyncio.get_running_loop()
        a = self.args
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
            start = loop.time()
            budget = self.budget
            decoding = []
            prefilling = []
            for r in self.running:
                if r.aborted:
                    continue
                if r.to_prefill == 0:
                    decoding.append(r)
            budget -= len(decoding)
            prefill_tokens = 0
            for r in self.running:
                if r.to_prefill > 0 and budget > 0 and not r.aborted:
                    chunk = min(r.to_prefill, budget)
                    budget -= chunk
                    prefill_tokens += chunk
                    prefilling.append((r, chunk))
            # Admission: FIFO, stops at the first request that does not fit (as vLLM's does).
            while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
                r = self.waiting[0]
                if r.aborted:
                    self.waiting.popleft()
                    continue
                if not self.try_admit(r):
                    break
                self.waiting.popleft()
                self.running.append(r)
                if r.to_prefill > 0:
                    chunk = min(r.to_prefill, budget)
                    budget -= chunk
                    prefill_tokens += chunk
                    prefilling.append((r, chunk))
            if not decoding and not prefilling:
                # Nothing runnable (the head of the queue waits for blocks held by aborted
                # requests, already released below): drop the aborted ones and look again.
                self.reap()
                if not self.running and self.waiting:
                    # Cannot happen (a request larger than the cache is refused on arrival);
                    # guard against a busy loop all the same.
                    await asyncio.sleep(0.001)
                continue
            modelled = (a.step_base + a.step_per_seq * (len(decoding) + len(prefilling))
                        + a.prefill_per_token * prefill_tokens) * self.scale
            end = start + modelled
            await asyncio.sleep(end - loop.time())
            woke = loop.time()
            now_wall = time.monotonic()
            for r, chunk in prefilling:
                r.to_prefill -= chunk
                if r.to_prefill == 0:
                    self.prefill_done(r)
                    self.emit(r, now_wall)
            for r in decoding:
                self.emit(r, now_wall)
            self.reap()
            finished = loop.time()
            lag = finished - end
            self.steps += 1
            self.lag_sum += lag
            self.modelled_sum += modelled
            self.busy_wall += finished - woke
            if lag > self.lag_max:
                self.lag_max = lag

    def reap(self):
        keep = []
        for r in self.running:
            if r.aborted or r.generated >= r.max_tokens:
                self.release(r)
                if r.aborted:
                    self.aborted_total += 1
                else:
                    self.success += 1
                    self.e2e_sum += (time.monotonic() - r.arrival) / self.scale
                if not r.done.done():
                    r.done.set_result(None)
            else:
                keep.append(r)
        self.running = keep

    def emit(self, r, now):
        """One generated token for r: an SSE event, or counted towards the plain answer."""
        if r.writer is not None and (r.writer.transport.is_closing() or r.reader.at_eof()):
            r.aborted = True
            return
        r.generated += 1
        self.generation_tokens_total += 1
        if r.first_token_at is None:
            r.first_token_at = now
            ttft = (now - r.arrival) / self.scale
            self.ttft_sum += ttft
            self.ttft_count += 1
            i = 0
            while i < len(TTFT_BUCKETS) and ttft > TTFT_BUCKETS[i]:
                i += 1
            self.ttft_counts[i] += 1
        if r.stream:
            last = r.generated >= r.max_tokens
            out = [sse_token_event(r, last)]
            if last:
                if r.include_usage:
                    out.append(sse_usage_event(r, self))
                out.append(b"data: [DONE]\n\n")
            if r.framing == "chunked":
                data = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in out)
                if last:
                    data += b"0\r\n\r\n"
            else:
                data = b"".join(out)
            r.writer.write(data)

    # ---- /metrics -----------------------------------------------------------------------

    def metrics(self):
        lbl = '{model_name="%s"}' % self.model.replace("\\", "\\\\").replace('"', '\\"')
        lbl_inner = lbl[1:-1]
        usage = self.used_blocks() / self.blocks
        out = []

        def family(name, kind, help_text, value, suffix=""):
            out.append("# HELP %s %s\n# TYPE %s %s\n%s%s%s %s\n"
                       % (name, help_text, name, kind, name, suffix, lbl, _num(value)))

        family("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.", len(self.running))
        family("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.", len(self.waiting))
        family("vllm:kv_cache_usage_perc", "gauge",
               "KV-cache usage. 1 means 100 percent usage.", usage)
        family("vllm:gpu_cache_usage_perc", "gauge",
               "GPU KV-cache usage (the older name). 1 means 100 percent usage.", usage)
        family("vllm:prefix_cache_queries", "counter",
               "Prefix cache queries, in terms of number of queried tokens.",
               self.prefix_queries, "_total")
        family("vllm:prefix_cache_hits", "counter",
               "Prefix cache hits, in terms of number of cached tokens.",
               self.prefix_hits, "_total")
        family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.",
               self.prompt_tokens_total, "_total")
        family("vllm:generation_tokens", "counter", "Number of generation tokens processed.",
               self.generation_tokens_total, "_total")
        out.append("# HELP vllm:request_success Count of successfully processed requests.\n"
                   "# TYPE vllm:request_success counter\n"
                   'vllm:request_success_total{%s,finished_reason="length"} %d\n'
                   % (lbl_inner, self.success))
        out.append("# HELP vllm:time_to_first_token_seconds Histogram of time to first token "
                   "in seconds (modelled time: wall time divided by the time scale).\n"
                   "# TYPE vllm:time_to_first_token_seconds histogram\n")
        acc = 0
        for i, le in enumerate(TTFT_BUCKETS):
            acc += self.ttft_counts[i]
            out.append('vllm:time_to_first_token_seconds_bucket{%s,le="%s"} %d\n'
                       % (lbl_inner, repr(float(le)), acc))
        acc += self.ttft_counts[-1]
        out.append('vllm:time_to_first_token_seconds_bucket{%s,le="+Inf"} %d\n' % (lbl_inner, acc))
        out.append("vllm:time_to_first_token_seconds_count%s %d\n" % (lbl, self.ttft_count))
        out.append("vllm:time_to_first_token_seconds_sum%s %s\n" % (lbl, _num(self.ttft_sum)))
        # The simulator's own figures (not vLLM's).
        family("sim:kv_cache_blocks", "gauge", "KV cache blocks in all.", self.blocks)
        family("sim:kv_cache_cached_blocks", "gauge", "Blocks holding a cached prefix.",
               len(self.cache))
        family("sim:requests_aborted", "counter", "Requests whose client went away.",
               self.aborted_total, "_total")
        family("sim:steps", "counter", "Scheduler steps run.", self.steps, "_total")
        family("sim:step_lag_seconds", "counter",
               "Wall seconds the steps ended after their modelled end, summed.",
               self.lag_sum, "_total")
        family("sim:step_lag_max_seconds", "gauge",
               "The largest lag of one step behind its modelled end (wall seconds).",
               self.lag_max)
        family("sim:step_modelled_seconds", "counter",
               "Modelled step durations, summed (wall seconds, time scale included).",
               self.modelled_sum, "_total")
        family("sim:time_scale", "gauge", "Every modelled time is multiplied by this.",
               self.scale)
        return "".join(out).encode()


def _num(v):
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def sse_token_event(r, last):
    fin = b'"length"' if last else b"null"
    tok = b" tok%d" % r.generated
    if r.chat:
        if r.generated == 1:
            delta = b'{"role":"assistant","content":"%s"}' % tok
        else:
            delta = b'{"content":"%s"}' % tok
        body = b'%s"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}' % (
            r.prefix, delta, fin)
    else:
        body = b'%s"choices":[{"index":0,"text":"%s","logprobs":null,"finish_reason":%s}]}' % (
            r.prefix, tok, fin)
    return b"data: " + body + b"\n\n"


def usage_dict(r, engine):
    return {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.generated,
            "total_tokens": r.prompt_tokens + r.generated,
            "prompt_tokens_details": {"cached_tokens": r.hit_blocks * BLOCK_TOKENS}}


def sse_usage_event(r, engine):
    """The last event when stream_options.include_usage is set: no choices, the usage."""
    return (b"data: " + r.prefix + b'"choices":[],"usage":'
            + json.dumps(usage_dict(r, engine), separators=(",", ":")).encode() + b"}\n\n")


# ---- HTTP/1.1 -----------------------------------------------------------------------------

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           411: "Length Required", 413: "Content Too Large", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 501: "Not Implemented"}


def response(status, body, ctype="application/json", keep_alive=True, extra=b""):
    head = ("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
            % (status, REASONS.get(status, "Error"), ctype, len(body),
               "" if keep_alive else "Connection: close\r\n")).encode()
    if extra:
        head = head[:-2] + extra + b"\r\n"
    return head + body


def error_body(status, message, kind):
    return json.dumps({"error": {"message": message, "type": kind, "param": None,
                                 "code": status}}).encode()


class Server:
    def __init__(self, engine):
        self.engine = engine
        self.conns = set()

    async def handle(self, reader, writer):
        self.conns.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            while True:
                keep = await self.one(reader, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except ValueError:
            # A malformed chunk size: answer 400 and close, as for any bad framing.
            writer.write(response(400, error_body(400, "bad chunked framing", "BadRequestError"),
                                  keep_alive=False))
        finally:
            self.conns.discard(writer)
            try:
                writer.close()
            except Exception:
                pass

    async def one(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            writer.write(response(431, error_body(431, "header too large", "BadRequestError"),
                                  keep_alive=False))
            return False
        lines = head[:-4].split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ")
        except ValueError:
            writer.write(response(400, error_body(400, "bad request line", "BadRequestError"),
                                  keep_alive=False))
            return False
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                writer.write(response(400, error_body(400, "bad header", "BadRequestError"),
                                      keep_alive=False))
                return False
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        http10 = version == "HTTP/1.0"
        conn = headers.get("connection", "").lower()
        keep = not http10 and "close" not in conn or (http10 and "keep-alive" in conn)
        body = b""
        te = headers.get("transfer-encoding", "").lower()
        if te:
            if te != "chunked":
                writer.write(response(501, error_body(501, "transfer-encoding", "BadRequestError"),
                                      keep_alive=False))
                return False
            parts = []
            total = 0
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    writer.write(response(413, error_body(413, "body too large", "BadRequestError"),
                                          keep_alive=False))
                    return False
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(parts)
        elif "content-length" in headers:
            try:
                n = int(headers["content-length"])
            except ValueError:
                n = -1
            if n < 0 or n > MAX_BODY_BYTES:
                writer.write(response(413 if n > 0 else 400,
                                      error_body(400, "bad content-length", "BadRequestError"),
                                      keep_alive=False))
                return False
            body = await reader.readexactly(n)
        path = target.split("?", 1)[0]
        e = self.engine
        if path in ("/v1/completions", "/v1/chat/completions"):
            if method != "POST":
                writer.write(response(405, error_body(405, "use POST", "BadRequestError"), keep))
                return keep
            return await self.completion(reader, writer, body, path.endswith("chat/completions"), keep,
                                         http10)
        if method not in ("GET", "HEAD"):
            writer.write(response(405, error_body(405, "use GET", "BadRequestError"), keep))
            return keep
        if path == "/health":
            writer.write(response(200, b"", keep_alive=keep))
        elif path == "/metrics":
            writer.write(response(200, e.metrics(), "text/plain; version=0.0.4; charset=utf-8",
                                  keep))
        elif path == "/v1/models":
            obj = {"object": "list", "data": [{"id": e.model, "object": "model",
                                               "created": int(time.time()), "owned_by": "sim",
                                               "root": e.model, "max_model_len":
                                               e.blocks * BLOCK_TOKENS}]}
            writer.write(response(200, json.dumps(obj).encode(), keep_alive=keep))
        else:
            writer.write(response(404, error_body(404, "not found", "NotFoundError"), keep))
        return keep

    async def completion(self, reader, writer, raw, chat, keep, http10):
        e = self.engine
        try:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise BadRequest(400, "the body is not JSON")
            if not isinstance(body, dict):
                raise BadRequest(400, "the body must be a JSON object")
            model = body.get("model", e.model)
            if model != e.model:
                raise BadRequest(404, "The model `%s` does not exist." % (model,),
                                 "NotFoundError")
            text, ntok = canonical_prompt(body, chat)
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
            if max_tokens is None:
                max_tokens = e.args.max_output
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                raise BadRequest(400, "max_tokens must be a positive integer")
            max_tokens = min(max_tokens, e.args.max_output)
            stream = body.get("stream", False) is True
            opts = body.get("stream_options")
            include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        except BadRequest as err:
            writer.write(response(err.status, error_body(err.status, str(err), err.kind), keep))
            return keep
        r = Request()
        r.chat = chat
        r.stream = stream
        r.include_usage = include_usage
        r.model = model
        r.prompt_tokens = max(1, ntok if ntok is not None else -(-len(text) // TOKEN_BYTES))
        if -(-(r.prompt_tokens + max_tokens) // BLOCK_TOKENS) > e.blocks:
            writer.write(response(400, error_body(
                400, "the prompt (%d tokens) and max_tokens (%d) do not fit in the KV cache"
                % (r.prompt_tokens, max_tokens), "BadRequestError"), keep))
            return keep
        r.max_tokens = max_tokens
        r.hashes = e.block_hashes(text, r.prompt_tokens)
        r.hit_blocks = 0
        r.reader = reader
        e.seq += 1
        r.rid = "%s-%d-%d" % ("chatcmpl" if chat else "cmpl", e.port, e.seq)
        r.arrival = time.monotonic()
        r.done = asyncio.get_running_loop().create_future()
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        r.prefix = ('{"id":"%s","object":"%s","created":%d,"model":%s,'
                    % (r.rid, obj, created, json.dumps(model))).encode()
        if stream:
            r.framing = "close" if http10 or e.args.sse_close else "chunked"
            head = ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                    "Cache-Control: no-cache\r\n"
                    + ("Transfer-Encoding: chunked\r\n" if r.framing == "chunked"
                       else "Connection: close\r\n") + "\r\n").encode()
            writer.write(head)
            r.writer = writer
        else:
            r.writer = None
            r.framing = None
        e.submit(r)
        if not stream:
            # A plain answer: the client may go away meanwhile; the request is then aborted.
            watch = asyncio.ensure_future(self.watch_eof(reader, writer, r))
            await r.done
            watch.cancel()
            if r.aborted:
                return False
            text_out = "".join(" tok%d" % (i + 1) for i in range(r.generated))
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text_out},
                          "logprobs": None, "finish_reason": "length"}
            else:
                choice = {"index": 0, "text": text_out, "logprobs": None,
                          "finish_reason": "length"}
            answer = {"id": r.rid, "object": "chat.completion" if chat else "text_completion",
                      "created": created, "model": model, "choices": [choice],
                      "usage": usage_dict(r, e)}
            writer.write(response(200, json.dumps(answer).encode(), keep_alive=keep))
            return keep
        await r.done
        if r.aborted:
            return False
        await writer.drain()
        return keep and r.framing == "chunked"

    async def watch_eof(self, reader, writer, r):
        # Plain requests: the transport notices a peer that closed only on a read or a write;
        # poll it cheaply so that an abandoned request frees its slot like vLLM's abort does.
        while not r.done.done():
            await asyncio.sleep(0.05)
            if writer.transport.is_closing() or reader.at_eof():
                r.aborted = True
                self.engine.wake.set()
                return


def parse_ports(args):
    if args.ports:
        return [int(p) for p in args.ports.split(",") if p]
    return [args.port + i for i in range(args.engines)]


def build_parser():
    p = argparse.ArgumentParser(
        description="An LLM engine simulator with the shape of vLLM (docs/llm.md).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="first port (default 8000)")
    p.add_argument("--engines", type=int, default=1,
                   help="engines in this process, on consecutive ports from --port (default 1)")
    p.add_argument("--ports", default="", help="comma-separated ports (instead of --port/--engines)")
    p.add_argument("--model", default="sim-llama-3.1-8b", help="the served model's name")
    p.add_argument("--kv-blocks", type=int, default=24000,
                   help="KV cache blocks of 16 tokens (default 24000: Llama-3.1-8B on one 80 GB "
                        "GPU at gpu_memory_utilization 0.9)")
    p.add_argument("--max-num-seqs", type=int, default=1024,
                   help="requests running at once (default 1024, vLLM's on an 80 GB H100)")
    p.add_argument("--max-batched-tokens", type=int, default=8192,
                   help="tokens per step, chunked prefill's budget (default 8192, vLLM's on "
                        "an 80 GB H100)")
    p.add_argument("--max-output", type=int, default=256,
                   help="max_tokens when a request gives none, and its upper bound (default 256)")
    p.add_argument("--step-base", type=float, default=0.0065,
                   help="seconds of a decode step at batch 1 (default 0.0065)")
    p.add_argument("--step-per-seq", type=float, default=0.00006,
                   help="seconds added to a step per running request (default 0.00006)")
    p.add_argument("--prefill-per-token", type=float, default=0.00006,
                   help="seconds per uncached prompt token (default 0.00006: ~16,700 tokens/s)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply every modelled time by this (default 1)")
    p.add_argument("--sse-close", action="store_true",
                   help="close-delimited event streams instead of chunked ones")
    p.add_argument("--ready-file", default="",
                   help="write the ports to this file once every engine listens")
    return p


async def main_async(args):
    ports = parse_ports(args)
    servers = []
    engines = []
    for port in ports:
        e = Engine(args, port)
        engines.append(e)
        asyncio.ensure_future(e.run())
        srv = await asyncio.start_server(Server(e).handle, args.host, port, backlog=1024,
                                         limit=MAX_HEADER_BYTES, reuse_address=True)
        servers.append(srv)
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(" ".join(str(s.sockets[0].getsockname()[1]) for s in servers) + "\n")
        os.replace(tmp, args.ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()


def main():
    args = build_parser().parse_args()
    for name in ("kv_blocks", "max_num_seqs", "max_batched_tokens", "max_output", "engines"):
        if getattr(args, name) < 1:
            sys.exit("engine.py: --%s must be at least 1" % name.replace("_", "-"))
    if args.time_scale <= 0 or min(args.step_base, args.step_per_seq,
                                   args.prefill_per_token) < 0:
        sys.exit("engine.py: times must not be negative, the time scale positive")
    try:
        asyncio.run(main_async(args))
    except OSError as err:
        sys.exit("engine.py: %s" % err)


if __name__ == "__main__":
    main()
