#!/usr/bin/env python3
"""The engine simulator's own overhead (docs/llm.md, "The engine simulator").

Starts one simulator process hosting ENGINES engines on 127.0.0.1, opens STREAMS concurrent
streamed completions on each (unique prompts of PROMPT tokens, OUTPUT tokens each), reads every
stream to its end, and reports per time scale: the streams that completed with [DONE], the
events received, and the scheduler's lag behind its modelled step ends (from the simulator's
sim:step_* counters) against the modelled step times.

    python3 bench/llm/overhead.py [--engines 2] [--streams 256] [--scales 1,2]
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def metrics(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: e\r\nConnection: close\r\n\r\n")
    data = await reader.read(-1)
    writer.close()
    out = {}
    for line in data.split(b"\r\n\r\n", 1)[1].decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name.split("{")[0]] = float(value)
    return out


async def stream(port, i, prompt_tokens, output):
    body = json.dumps({"model": "sim-llama-3.1-8b", "stream": True, "max_tokens": output,
                       "prompt": ("%08d" % i) * (prompt_tokens // 2)}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: e\r\nConnection: close\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    events = 0
    tail = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        events += chunk.count(b"data: {")
        tail = (tail + chunk)[-64:]
    writer.close()
    return events, b"data: [DONE]" in tail


async def measure(ports, streams, prompt_tokens, output):
    t0 = time.monotonic()
    results = await asyncio.gather(*(stream(p, k * 100000 + i, prompt_tokens, output)
                                     for k, p in enumerate(ports) for i in range(streams)))
    wall = time.monotonic() - t0
    ms = await asyncio.gather(*(metrics(p) for p in ports))
    return results, wall, ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--engines", type=int, default=2)
    p.add_argument("--streams", type=int, default=256, help="concurrent streams per engine")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output", type=int, default=128)
    p.add_argument("--scales", default="1,2")
    args = p.parse_args()
    print("engines=%d streams/engine=%d prompt=%d output=%d"
          % (args.engines, args.streams, args.prompt_tokens, args.output))
    for scale in [float(x) for x in args.scales.split(",")]:
        ports = [free_port() for _ in range(args.engines)]
        work = tempfile.mkdtemp(prefix="llm-overhead-")
        ready = os.path.join(work, "ready")
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "engine.py"),
                                 "--ports", ",".join(map(str, ports)), "--time-scale", str(scale),
                                 "--ready-file", ready])
        try:
            deadline = time.monotonic() + 15
            while not os.path.exists(ready) and time.monotonic() < deadline:
                time.sleep(0.02)
            results, wall, ms = asyncio.run(measure(ports, args.streams, args.prompt_tokens,
                                                    args.output))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
        done = sum(1 for e, ok in results if ok)
        events = sum(e for e, ok in results)
        steps = sum(m["sim:steps_total"] for m in ms)
        lag = sum(m["sim:step_lag_seconds_total"] for m in ms)
        modelled = sum(m["sim:step_modelled_seconds_total"] for m in ms)
        lag_max = max(m["sim:step_lag_max_seconds"] for m in ms)
        print("time scale %g: %d of %d streams ended with [DONE], %d events in %.1f s wall; "
              "mean step %.2f ms modelled (wall), mean lag %.2f ms (%.1f %%), largest lag %.1f ms"
              % (scale, done, len(results), events, wall, 1000 * modelled / steps,
                 1000 * lag / steps, 100 * lag / modelled, 1000 * lag_max))


if __name__ == "__main__":
    main()
