#!/usr/bin/env python3
"""The LLM gateway benchmark (docs/llm.md, "The benchmark"): K simulated engines
(bench/llm/engine.py), N gateways on one membership, clients spread over the gateways, several
workloads and routing policies in the same run.

Policies:
  rr           round robin, a router in this driver per gateway (its own counter)
  least        least requests in flight, a router in this driver per gateway (its own counts)
  ch           plain consistent hashing on the prompt key, no bound: real chring-lb with
               --balance 1e9 (a bound no load reaches)
  cache_aware  SGLang's cache-aware router, a router in this driver per gateway: an approximate
               radix tree of the prompts it routed, per worker, with SGLang's thresholds
  chring       real chring-lb per gateway, --key prompt, the default bound (1.25)
  chring_floor chring + --min-capacity (default 16: the floor under the bound), when the binary
               has it (not in the default set of policies)
  chring_load  chring + --load-metrics /metrics (the engines' reported load), when the binary
               has the flag
The driver's routers send straight to the engines (each "gateway" is an object in this process
with its own state); the chring-lb policies go through 3 real chring-lb processes.

    python3 bench/llm/bench.py [--quick] [--lb build/lb/chring-lb] [--out bench/results]

Writes OUT/llm.csv (one row per workload and policy), OUT/llm_keyprefix.csv, OUT/llm_targets.csv,
OUT/llm_overhead.csv and PNG plots (gnuplot).  Times are modelled seconds: wall seconds divided by
the engines' --time-scale.
"""

import argparse
import asyncio
import bisect
import csv
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
ENGINE = os.path.join(HERE, "engine.py")
MODEL = "sim-llama-3.1-8b"
TOKEN_BYTES = 4

# A shared opening, as real system prompts often have: key prefixes shorter than it cannot
# tell the system prompts apart (the --key-prefix measurement).
PREAMBLE = ("You are a helpful, careful and honest assistant. Follow the operator's "
            "instructions below and answer the user's question concisely.\n")

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
         "rho sigma tau upsilon phi chi psi omega river stone cloud paper engine signal market "
         "garden window letter number orange silver yellow purple forest bridge castle planet "
         "rocket winter summer autumn spring morning evening").split()


def text_of(rng, nbytes):
    out = []
    n = 0
    while n < nbytes:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:nbytes]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- workloads ----------------------------------------------------------------------------

class Workload:
    def __init__(self, name, requests, bypass=False):
        self.name = name
        self.requests = requests  # list of (system_id, system_text, question_text)
        self.bypass = bypass


def make_workloads(cfg, seed=1):
    rng = random.Random(seed)
    sys_bytes = cfg.system_tokens * TOKEN_BYTES
    q_bytes = cfg.question_tokens * TOKEN_BYTES
    systems = {}

    def system(i):
        if i not in systems:
            r = random.Random(seed * 1000003 + i)
            body = text_of(r, sys_bytes - len(PREAMBLE))
            systems[i] = PREAMBLE + body
        return systems[i]

    def question():
        return text_of(rng, q_bytes)

    out = {}
    # SGLang's generated-shared-prefix: groups x prompts per group, shuffled.
    gsp = [(g, system(g), question()) for g in range(cfg.groups) for _ in range(cfg.per_group)]
    rng.shuffle(gsp)
    out["shared_prefix"] = gsp
    n = len(gsp)
    # Hot prefix: half the requests share system prompt 0, the rest spread over the others.
    hot = []
    for i in range(n):
        g = 0 if i % 2 == 0 else 1 + rng.randrange(cfg.groups - 1)
        hot.append((g, system(g), question()))
    rng.shuffle(hot)
    out["hot_prefix"] = hot
    # Long tail: Zipf (s = 1) over 1,000 system prompts.
    weights = [1.0 / (k + 1) for k in range(1000)]
    cum = []
    acc = 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    tail = []
    for _ in range(n):
        g = 10000 + bisect.bisect_left(cum, rng.random() * acc)
        tail.append((g, system(g), question()))
    out["long_tail"] = tail
    return out


def canonical_key(system_text, question_text):
    """The key chring-lb's --key prompt builds for a chat body (docs/lb.md)."""
    return (MODEL.encode() + b"\0" + b"system\n" + system_text.encode() + b"\n"
            + b"user\n" + question_text.encode() + b"\n")


def chat_body(system_text, question_text, max_tokens):
    return json.dumps({"model": MODEL, "stream": True, "max_tokens": max_tokens,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "system", "content": system_text},
                                    {"role": "user", "content": question_text}]}).encode()


# ---- the driver's routers (one object per gateway) ----------------------------------------

class RoundRobin:
    def __init__(self, engines, rng):
        self.engines = engines
        self.next = rng.randrange(len(engines))

    def pick(self, text):
        i = self.next
        self.next = (i + 1) % len(self.engines)
        return i

    def done(self, i):
        pass


class LeastRequests:
    def __init__(self, engines, rng):
        self.load = [0] * len(engines)
        self.rng = rng

    def pick(self, text):
        low = min(self.load)
        i = self.rng.choice([k for k, v in enumerate(self.load) if v == low])
        self.load[i] += 1
        return i

    def done(self, i):
        self.load[i] -= 1


def common_len(a, b):
    """Length of the common prefix of two strings (binary search over slice comparisons)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class Node:
    __slots__ = ("text", "children", "tenants")

    def __init__(self, text):
        self.text = text
        self.children = {}
        self.tenants = {}  # tenant -> last access (a counter)


class ApproxTree:
    """An approximate radix tree of the texts routed to each tenant (worker), on characters,
    as SGLang's router keeps one: prefix_match finds the longest stored prefix and a tenant that
    holds it; each tenant's size is the number of characters stored for it."""

    def __init__(self):
        self.root = Node("")
        self.size = {}
        self.clock = 0

    def add_tenant(self, t):
        self.size.setdefault(t, 0)

    def insert(self, text, tenant):
        self.clock += 1
        node = self.root
        node.tenants[tenant] = self.clock
        i = 0
        while i < len(text):
            child = node.children.get(text[i])
            if child is None:
                leaf = Node(text[i:])
                leaf.tenants[tenant] = self.clock
                node.children[text[i]] = leaf
                self.size[tenant] = self.size.get(tenant, 0) + len(leaf.text)
                return
            k = common_len(child.text, text[i:])
            if k < len(child.text):
                # Split the edge at k.
                upper = Node(child.text[:k])
                upper.tenants = dict(child.tenants)
                child.text = child.text[k:]
                upper.children[child.text[0]] = child
                node.children[text[i]] = upper
                child = upper
            if tenant not in child.tenants:
                self.size[tenant] = self.size.get(tenant, 0) + len(child.text)
            child.tenants[tenant] = self.clock
            node = child
            i += k

    def prefix_match(self, text):
        node = self.root
        i = 0
        last = None
        while i < len(text):
            child = node.children.get(text[i])
            if child is None:
                break
            k = common_len(child.text, text[i:])
            i += k
            last = child
            if k < len(child.text):
                break
            node = child
        if last is None or not last.tenants:
            return 0, None
        tenant = max(last.tenants, key=last.tenants.get)
        return i, tenant

    def smallest(self):
        return min(self.size, key=lambda t: (self.size[t], t))


class CacheAware:
    """SGLang's cache-aware policy (the cache_aware.rs policy of its sgl-router) with its defaults:
    cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5; the loads are this
    router's own requests in flight per worker.  The eviction of old tree nodes (every 120 s above
    2^26 characters) never triggers at this benchmark's size and is left out."""

    def __init__(self, engines, rng, cache_threshold=0.3, abs_threshold=64, rel_threshold=1.5):
        self.load = [0] * len(engines)
        self.tree = ApproxTree()
        for i in range(len(engines)):
            self.tree.add_tenant(i)
        self.cache_threshold = cache_threshold
        self.abs_threshold = abs_threshold
        self.rel_threshold = rel_threshold

    def pick(self, text):
        hi, lo = max(self.load), min(self.load)
        if hi - lo > self.abs_threshold and hi > lo * self.rel_threshold:
            i = min(range(len(self.load)), key=lambda k: self.load[k])
        else:
            matched, tenant = self.tree.prefix_match(text)
            rate = matched / len(text) if text else 0.0
            i = tenant if rate > self.cache_threshold and tenant is not None else self.tree.smallest()
        self.tree.insert(text, i)
        self.load[i] += 1
        return i

    def done(self, i):
        self.load[i] -= 1


ROUTERS = {"rr": RoundRobin, "least": LeastRequests, "cache_aware": CacheAware}
LB_POLICIES = ("ch", "chring", "chring_load", "chring_floor")


# ---- processes ----------------------------------------------------------------------------

class Procs:
    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []

    def start(self, argv, name):
        log = open(os.path.join(self.workdir, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((p, log))
        return p

    def stop_all(self):
        for p, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p, log in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            log.close()
        self.procs = []


def wait_port(port, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nothing listens on port %d" % port)


def start_engines(procs, cfg, python):
    ports = [free_port() for _ in range(cfg.engines)]
    per = (len(ports) + cfg.engine_procs - 1) // cfg.engine_procs
    for k in range(0, len(ports), per):
        group = ports[k:k + per]
        procs.start([python, ENGINE, "--ports", ",".join(map(str, group)),
                     "--time-scale", str(cfg.time_scale), "--kv-blocks", str(cfg.kv_blocks),
                     "--max-num-seqs", str(cfg.max_num_seqs), "--max-output", str(cfg.output)],
                    "engines%d" % k)
    for p in ports:
        wait_port(p)
    return ports


def lb_help(lb):
    try:
        r = subprocess.run([lb, "--help"], capture_output=True, text=True, timeout=10)
        return r.stdout + r.stderr
    except OSError:
        return ""


def start_gateways(procs, cfg, engine_ports, policy, key_prefix):
    ports = [free_port() for _ in range(cfg.gateways)]
    for i, port in enumerate(ports):
        argv = [cfg.lb, "--listen", "127.0.0.1:%d" % port, "--threads", "1",
                # Streams of minutes under a queued load: no deadline cuts a relayed stream and
                # no passive-health verdict is reached in this benchmark (docs/llm.md).
                "--backend-timeout", "120", "--fail-timeout", "0",
                "--max-requests", "100000"]
        if cfg.prompt_key:
            argv += ["--key", "prompt"]
        else:
            argv += ["--key", "header:X-Prompt-Key"]
        if key_prefix and cfg.prompt_key:
            argv += ["--key-prefix", str(key_prefix)]
        if policy == "ch":
            argv += ["--balance", "1000000000"]
        if policy == "chring_load":
            argv += ["--load-metrics", "/metrics"]
        if policy == "chring_floor":
            argv += ["--min-capacity", str(cfg.min_capacity)]
        for p in engine_ports:
            argv += ["--backend", "127.0.0.1:%d" % p]
        procs.start(argv, "lb%d" % i)
    for p in ports:
        wait_port(p)
    return ports


# ---- the client ---------------------------------------------------------------------------

async def scrape(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: e\r\nConnection: close\r\n\r\n")
    data = await reader.read(-1)
    writer.close()
    out = {}
    for line in data.split(b"\r\n\r\n", 1)[1].decode().splitlines():
        if line.startswith("#") or not line:
            continue
        name, _, value = line.rpartition(" ")
        out[name.split("{", 1)[0]] = out.get(name.split("{", 1)[0], 0.0) + float(value)
    return out


async def stream_request(port, body, headers=b""):
    """Sends one streamed completion; returns (wall send, wall first token, wall end, tokens,
    usage or None)."""
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: llm\r\n"
                 b"Content-Type: application/json\r\nConnection: close\r\n" + headers
                 + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    first = None
    head_done = False
    buf = b""
    tokens = 0
    tail = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        if not head_done:
            buf += chunk
            if b"\r\n\r\n" not in buf:
                continue
            head, _, chunk = buf.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                writer.close()
                raise RuntimeError("answer: %r" % head[:200])
            head_done = True
        n = chunk.count(b"data: {")
        if n and first is None:
            first = time.monotonic()
        tokens += n
        tail = (tail + chunk)[-4096:]
    end = time.monotonic()
    writer.close()
    usage = None
    i = tail.rfind(b'"usage":')
    if i >= 0:
        try:
            usage = json.loads(tail[i + 8:tail.index(b"}}", i) + 2].decode())
        except ValueError:
            usage = None
    if usage is not None:
        tokens -= 1  # the usage event carries no token
    if b"data: [DONE]" not in tail:
        raise RuntimeError("a stream ended without [DONE]")
    return t0, first, end, tokens, usage


async def run_one(cfg, workload, policy, engine_ports, gateway_ports, key_prefix=None):
    rng = random.Random(7)
    reqs = list(workload.requests)
    results = []
    routers = None
    if policy in ROUTERS:
        routers = [ROUTERS[policy](engine_ports, random.Random(100 + g))
                   for g in range(cfg.gateways)]
    queue_max = 0
    polling = True

    async def poll():
        nonlocal queue_max
        while polling:
            try:
                ms = await asyncio.gather(*(scrape(p) for p in engine_ports))
                queue_max = max(queue_max, max(m.get("vllm:num_requests_waiting", 0) for m in ms))
            except OSError:
                pass
            await asyncio.sleep(cfg.poll_interval)

    before = await asyncio.gather(*(scrape(p) for p in engine_ports))
    it = iter(enumerate(reqs))

    async def client(cid):
        g = cid % cfg.gateways
        for idx, (sid, system_text, question) in it:
            body = chat_body(system_text, question, cfg.output)
            if routers is not None:
                text = "system\n" + system_text + "\nuser\n" + question + "\n"
                e = routers[g].pick(text)
                try:
                    r = await stream_request(engine_ports[e], body)
                finally:
                    routers[g].done(e)
            else:
                hdr = b""
                if not cfg.prompt_key:
                    # Without --key prompt, the same key cut at the same length, hashed here.
                    k = canonical_key(system_text, question)[:key_prefix or cfg.fallback_prefix]
                    hdr = b"X-Prompt-Key: %x\r\n" % (hash(k) & 0xFFFFFFFFFFFFFFFF)
                r = await stream_request(gateway_ports[g], body, hdr)
            results.append(r)

    bypass_stats = {"queries": 0, "hits": 0, "n": 0}
    bypass_on = True

    async def bypass_client(k):
        r2 = random.Random(5000 + k)
        while bypass_on:
            body = chat_body(text_of(r2, cfg.system_tokens * TOKEN_BYTES), text_of(
                r2, cfg.question_tokens * TOKEN_BYTES), cfg.output)
            t0, first, end, tokens, usage = await stream_request(engine_ports[0], body)
            if usage:
                bypass_stats["queries"] += usage["prompt_tokens"]
                bypass_stats["hits"] += usage["prompt_tokens_details"]["cached_tokens"]
                bypass_stats["n"] += 1

    poller = asyncio.ensure_future(poll())
    bypassers = []
    if workload.bypass:
        bypassers = [asyncio.ensure_future(bypass_client(k)) for k in range(cfg.bypass_clients)]
    start = time.monotonic()
    await asyncio.gather(*(client(c) for c in range(cfg.clients)))
    end = time.monotonic()
    bypass_on = False
    if bypassers:
        await asyncio.gather(*bypassers)
    polling = False
    await poller
    after = await asyncio.gather(*(scrape(p) for p in engine_ports))

    def total(ms, name):
        return sum(m.get(name, 0.0) for m in ms)

    queries = total(after, "vllm:prefix_cache_queries_total") - total(
        before, "vllm:prefix_cache_queries_total") - bypass_stats["queries"]
    hits = total(after, "vllm:prefix_cache_hits_total") - total(
        before, "vllm:prefix_cache_hits_total") - bypass_stats["hits"]
    s = cfg.time_scale
    ttft = sorted((f - t0) / s for t0, f, e, n, u in results)
    e2e = sorted((e - t0) / s for t0, f, e, n, u in results)
    tokens = sum(n for t0, f, e, n, u in results)
    lag = total(after, "sim:step_lag_seconds_total") - total(before, "sim:step_lag_seconds_total")
    steps = total(after, "sim:steps_total") - total(before, "sim:steps_total")
    modelled = total(after, "sim:step_modelled_seconds_total") - total(
        before, "sim:step_modelled_seconds_total")
    return {
        "workload": workload.name, "policy": policy,
        "key_prefix": key_prefix if key_prefix else "",
        "requests": len(results),
        "hit_rate": round(hits / queries, 4) if queries else 0.0,
        "ttft_mean": round(sum(ttft) / len(ttft), 4),
        "ttft_p50": round(pct(ttft, 0.50), 4),
        "ttft_p99": round(pct(ttft, 0.99), 4),
        "e2e_mean": round(sum(e2e) / len(e2e), 4),
        "e2e_p99": round(pct(e2e, 0.99), 4),
        "tokens_per_s": round(tokens / ((end - start) / s), 1),
        "queue_max": int(queue_max),
        "wall_s": round(end - start, 2),
        "step_lag_mean_ms": round(1000 * lag / steps, 3) if steps else 0.0,
        "step_modelled_mean_ms": round(1000 * modelled / steps, 3) if steps else 0.0,
    }


def pct(sorted_values, q):
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))
    return sorted_values[i]


def check_lag(r):
    """A run whose simulator lagged its modelled steps by more than a fifth measured the machine's
    load more than the policy: say so (docs/llm.md, "The engine simulator")."""
    if r["step_modelled_mean_ms"] and r["step_lag_mean_ms"] > 0.2 * r["step_modelled_mean_ms"]:
        print("warning: %s/%s: the simulator lagged %.0f %% behind its modelled steps (a busy "
              "machine): its times are not comparable" % (
                  r["workload"], r["policy"],
                  100 * r["step_lag_mean_ms"] / r["step_modelled_mean_ms"]), file=sys.stderr)
    return r


def run_case(cfg, workload, policy, key_prefix=None):
    work = tempfile.mkdtemp(prefix="llm-bench-")
    procs = Procs(work)
    try:
        engines = start_engines(procs, cfg, cfg.python)
        gateways = []
        if policy in LB_POLICIES:
            gateways = start_gateways(procs, cfg, engines, policy,
                                      key_prefix if key_prefix else cfg.key_prefix)
        return check_lag(asyncio.run(run_one(cfg, workload, policy, engines, gateways,
                                             key_prefix)))
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


# ---- reporting ----------------------------------------------------------------------------

FIELDS = ["workload", "policy", "key_prefix", "requests", "hit_rate", "ttft_mean", "ttft_p50",
          "ttft_p99", "e2e_mean", "e2e_p99", "tokens_per_s", "queue_max", "wall_s",
          "step_lag_mean_ms", "step_modelled_mean_ms"]


def write_csv(path, rows, fields=FIELDS):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def targets(rows):
    by = {(r["workload"], r["policy"]): r for r in rows}
    out = []

    def add(name, a, b, metric, bound, cmp):
        ra, rb = by.get(a), by.get(b)
        if not ra or not rb:
            out.append({"target": name, "value": "", "bound": bound, "met": "not run"})
            return
        va, vb = float(ra[metric]), float(rb[metric])
        ratio = va / vb if vb else float("inf")
        met = ratio <= bound if cmp == "le" else ratio >= bound
        out.append({"target": name, "value": round(ratio, 3), "bound": bound,
                    "met": "yes" if met else "no"})

    sp, hp = "shared_prefix", "hot_prefix"
    add("shared_prefix: chring mean TTFT / round robin's", (sp, "chring"), (sp, "rr"),
        "ttft_mean", 0.5, "le")
    add("shared_prefix: chring tokens/s / round robin's", (sp, "chring"), (sp, "rr"),
        "tokens_per_s", 1.5, "ge")
    add("hot_prefix: chring TTFT p99 / plain CH's", (hp, "chring"), (hp, "ch"), "ttft_p99", 0.5,
        "le")
    add("hot_prefix: chring hit rate / plain CH's", (hp, "chring"), (hp, "ch"), "hit_rate", 0.9,
        "ge")
    for w in ("shared_prefix", "hot_prefix", "long_tail"):
        add("%s: chring hit rate / cache-aware's" % w, (w, "chring"), (w, "cache_aware"),
            "hit_rate", 1.0, "ge")
        add("%s: chring TTFT p99 / cache-aware's" % w, (w, "chring"), (w, "cache_aware"),
            "ttft_p99", 1.0, "le")
    bw = "shared_prefix+bypass"
    add("%s: chring_load TTFT p99 / chring's" % bw, (bw, "chring_load"), (bw, "chring"),
        "ttft_p99", 0.8, "le")
    return out


GNUPLOT_BARS = r"""
set terminal pngcairo size 1100,420 font ",10"
set output '{out}'
set datafile separator ','
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top
set grid ytics
set yrange [0:*]
set ylabel '{ylabel}'
set title '{title}'
set xtics noenhanced
set key noenhanced
plot for [i=2:{ncol}] '{data}' using i:xtic(1) title columnhead
"""

GNUPLOT_PREFIX = r"""
set terminal pngcairo size 1000,420 font ",10"
set output '{out}'
set datafile separator ','
set logscale x 2
set xlabel '--key-prefix (bytes)'
set ylabel 'prefix-cache hit rate'
set y2label 'mean TTFT (s, modelled)'
set ytics nomirror
set y2tics
set yrange [0:1]
set y2range [0:*]
set grid
set key outside right top noenhanced
set title 'chring, shared-prefix workload: the key prefix'
plot '{data}' using 1:($4==2048?$2:1/0) with linespoints lw 2 title 'hit rate, system prompt 8 KB' axes x1y1, \
     '{data}' using 1:($4==128?$2:1/0) with linespoints lw 2 title 'hit rate, system prompt 512 B' axes x1y1, \
     '{data}' using 1:($4==2048?$3:1/0) with linespoints dt 2 title 'mean TTFT, 8 KB' axes x1y2, \
     '{data}' using 1:($4==128?$3:1/0) with linespoints dt 2 title 'mean TTFT, 512 B' axes x1y2
"""


def plots(out_dir, rows, prefix_rows):
    if not shutil.which("gnuplot"):
        print("gnuplot not found: no plots", file=sys.stderr)
        return
    workloads = []
    policies = []
    for r in rows:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
        if r["policy"] not in policies:
            policies.append(r["policy"])
    by = {(r["workload"], r["policy"]): r for r in rows}
    tmp = tempfile.mkdtemp(prefix="llm-plot-")
    for metric, ylabel, title in () if not rows else (
                                 ("ttft_p99", "TTFT p99 (s, modelled)", "TTFT p99"),
                                  ("ttft_mean", "mean TTFT (s, modelled)", "mean TTFT"),
                                  ("hit_rate", "prefix-cache hit rate", "prefix-cache hit rate"),
                                  ("tokens_per_s", "output tokens/s (modelled)", "throughput")):
        data = os.path.join(tmp, "llm_plot_%s.csv" % metric)
        with open(data, "w") as f:
            f.write("workload," + ",".join(policies) + "\n")
            for w in workloads:
                f.write(w + "," + ",".join(str(by[(w, p)][metric]) if (w, p) in by else "NaN"
                                           for p in policies) + "\n")
        script = GNUPLOT_BARS.format(out=os.path.join(out_dir, "llm_%s.png" % metric),
                                     ylabel=ylabel, title=title + " by workload and policy",
                                     ncol=len(policies) + 1, data=data)
        subprocess.run(["gnuplot"], input=script, text=True, check=False)
    if prefix_rows:
        data = os.path.join(tmp, "llm_plot_keyprefix.csv")
        with open(data, "w") as f:
            for r in prefix_rows:
                f.write("%s,%s,%s,%s\n" % (r["key_prefix"], r["hit_rate"], r["ttft_mean"],
                                            r["system_tokens"]))
        subprocess.run(["gnuplot"], input=GNUPLOT_PREFIX.format(
            out=os.path.join(out_dir, "llm_keyprefix.png"), data=data), text=True, check=False)
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a short run (about 90 s)")
    p.add_argument("--lb", default=os.path.join(ROOT, "build", "lb", "chring-lb"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--python", default=sys.executable, help="the engines' interpreter")
    p.add_argument("--engines", type=int, default=8)
    p.add_argument("--engine-procs", type=int, default=4,
                   help="simulator processes hosting the engines (default 4)")
    p.add_argument("--gateways", type=int, default=3)
    p.add_argument("--time-scale", type=float, default=0)
    p.add_argument("--groups", type=int, default=0)
    p.add_argument("--per-group", type=int, default=0)
    p.add_argument("--clients", type=int, default=0,
                   help="concurrent clients in a closed loop (default: one per request, all at once)")
    p.add_argument("--output", type=int, default=256)
    p.add_argument("--system-tokens", type=int, default=2048)
    p.add_argument("--question-tokens", type=int, default=128)
    p.add_argument("--kv-blocks", type=int, default=24000)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--key-prefix", type=int, default=0,
                   help="chring-lb's --key-prefix for the policy runs (0: its default)")
    p.add_argument("--workloads", default="")
    p.add_argument("--policies", default="")
    p.add_argument("--no-sweep", action="store_true", help="skip the --key-prefix measurement")
    p.add_argument("--sweep-only", action="store_true", help="only the --key-prefix measurement")
    p.add_argument("--replot", action="store_true",
                   help="draw the plots again from OUT/llm.csv and OUT/llm_keyprefix.csv")
    p.add_argument("--sweep-prefixes", default="64,128,256,1024,4096,16384",
                   help="the --key-prefix values measured")
    p.add_argument("--sweep-system-tokens", default="2048,128",
                   help="system prompt lengths of the --key-prefix measurement")
    p.add_argument("--poll-interval", type=float, default=0.2)
    p.add_argument("--min-capacity", type=int, default=16,
                   help="chring_floor's --min-capacity (requests an engine keeps whatever the load)")
    cfg = p.parse_args()
    if cfg.quick:
        # A taste of the full run: 16 x 8 requests, two workloads, four policies.
        defaults = dict(time_scale=2, groups=16, per_group=8,
                        workloads="shared_prefix,hot_prefix",
                        policies="rr,ch,cache_aware,chring")
    else:
        # SGLang's generated-shared-prefix shape (64 groups x 16 prompts, system prompt 2048
        # tokens, question 128, output 256), every request sent at once as SGLang's
        # bench_serving does by default (--request-rate inf).
        defaults = dict(time_scale=2, groups=64, per_group=16,
                        workloads="shared_prefix,hot_prefix,long_tail,shared_prefix+bypass",
                        policies="rr,least,ch,cache_aware,chring,chring_load")
    for k, v in defaults.items():
        if not getattr(cfg, k):
            setattr(cfg, k, v)
    if not cfg.clients:
        cfg.clients = cfg.groups * cfg.per_group  # all at once
    cfg.bypass_clients = max(1, cfg.clients // 16)
    cfg.fallback_prefix = 1024
    if cfg.replot:
        def read(name):
            path = os.path.join(cfg.out, name)
            if not os.path.exists(path):
                return []
            with open(path) as f:
                return list(csv.DictReader(f))
        plots(cfg.out, read("llm.csv"), read("llm_keyprefix.csv"))
        return
    help_text = lb_help(cfg.lb)
    if not help_text:
        sys.exit("bench.py: cannot run %s (build it: ninja -C build)" % cfg.lb)
    cfg.prompt_key = "prompt" in help_text.split("--key-prefix")[0]
    has_load = "--load-metrics" in help_text
    if not cfg.prompt_key:
        print("note: this chring-lb has no --key prompt: the chring policies route by a header "
              "carrying a hash of the same key, set by the driver", file=sys.stderr)
    policies = cfg.policies.split(",")
    if "chring_floor" in policies and "--min-capacity" not in help_text:
        print("note: this chring-lb has no --min-capacity: chring_floor skipped", file=sys.stderr)
        policies.remove("chring_floor")
    if "chring_load" in policies and not has_load:
        print("note: this chring-lb has no --load-metrics: chring_load skipped", file=sys.stderr)
        policies.remove("chring_load")
    os.makedirs(cfg.out, exist_ok=True)
    base = make_workloads(cfg)
    rows = []
    t_start = time.monotonic()
    for wname in ([] if cfg.sweep_only else cfg.workloads.split(",")):
        bypass = wname.endswith("+bypass")
        wl = Workload(wname, base[wname.replace("+bypass", "")], bypass)
        for pol in policies:
            r = run_case(cfg, wl, pol)
            rows.append(r)
            print(json.dumps(r), flush=True)
    prefix_rows = []
    if not cfg.no_sweep and not cfg.quick:
        # The key prefix: system prompts of 2,048 tokens (8 KB, the workload above) and of 128
        # tokens (512 bytes: a short one, where a long key prefix reaches the user's question).
        for st in [int(x) for x in cfg.sweep_system_tokens.split(",") if x]:
            cfg2 = argparse.Namespace(**vars(cfg))
            cfg2.system_tokens = st
            wl = Workload("shared_prefix_sys%d" % st, make_workloads(cfg2)["shared_prefix"])
            for kp in [int(x) for x in cfg.sweep_prefixes.split(",") if x]:
                r = run_case(cfg2, wl, "chring", key_prefix=kp)
                r["system_tokens"] = st
                prefix_rows.append(r)
                print(json.dumps(r), flush=True)
    tag = "llm_quick" if cfg.quick else "llm"
    tg = targets(rows)
    if rows:
        write_csv(os.path.join(cfg.out, tag + ".csv"), rows)
        write_csv(os.path.join(cfg.out, tag + "_targets.csv"), tg,
                  ["target", "value", "bound", "met"])
    if prefix_rows:
        write_csv(os.path.join(cfg.out, "llm_keyprefix.csv"), prefix_rows,
                  ["system_tokens"] + FIELDS)
    if not cfg.quick and not cfg.sweep_only:
        plots(cfg.out, rows, prefix_rows)
    elif prefix_rows:
        plots(cfg.out, [], prefix_rows)
    for t in tg:
        print("target: %(target)s = %(value)s (bound %(bound)s): %(met)s" % t)
    print("total wall time: %.0f s" % (time.monotonic() - t_start))


if __name__ == "__main__":
    main()
