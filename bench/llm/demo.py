#!/usr/bin/env python3
"""make llm-demo: four simulated engines behind chring-lb --key prompt (docs/llm.md).

Starts bench/llm/engine.py (4 engines in one process) and one chring-lb on 127.0.0.1, sends
three system prompts with four questions each (chat, plain answers) and one streamed answer,
prints which engine served each request and how many prompt tokens it found in its prefix
cache, then each engine's vLLM counters.  Stops what it started.

    python3 bench/llm/demo.py [--lb build/lb/chring-lb]
"""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
MODEL = "sim-llama-3.1-8b"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("llm-demo: nothing listens on port %d" % port)


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name.split("{")[0]] = float(value)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lb", default=os.path.join(ROOT, "build", "lb", "chring-lb"))
    args = p.parse_args()
    if not os.access(args.lb, os.X_OK):
        sys.exit("llm-demo: %s is not built (ninja -C build)" % args.lb)
    work = tempfile.mkdtemp(prefix="llm-demo-")
    engines = [free_port() for _ in range(4)]
    lb_port = free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "engine.py"),
             "--ports", ",".join(map(str, engines))],
            stdout=open(os.path.join(work, "engines.log"), "w"), stderr=subprocess.STDOUT))
        lb = [args.lb, "--listen", "127.0.0.1:%d" % lb_port, "--threads", "1", "--key", "prompt"]
        for e in engines:
            lb += ["--backend", "127.0.0.1:%d" % e]
        procs.append(subprocess.Popen(lb, stdout=open(os.path.join(work, "lb.log"), "w"),
                                      stderr=subprocess.STDOUT))
        for port in engines + [lb_port]:
            wait_port(port)
        print("engines on 127.0.0.1:%s; chring-lb on 127.0.0.1:%d\n"
              % (",".join(map(str, engines)), lb_port))
        print("$ %s\n" % " ".join(lb))
        systems = {
            "travel": "You are the travel desk of Alpha Air. " * 120,
            "legal": "You answer questions about tenancy law in plain words. " * 90,
            "code": "You review C code for memory safety and undefined behaviour. " * 80,
        }
        questions = ["What should I check first?", "Summarise the rules.",
                     "Give me an example.", "What is the usual mistake?"]
        print("%-8s %-30s %-8s %s" % ("system", "question", "engine", "cached prompt tokens"))
        for q in questions:
            for name, text in systems.items():
                status, data = post(lb_port, {
                    "model": MODEL, "max_tokens": 8,
                    "messages": [{"role": "system", "content": text},
                                 {"role": "user", "content": q}]})
                if status != 200:
                    sys.exit("llm-demo: status %d: %s" % (status, data[:200]))
                obj = json.loads(data)
                engine = obj["id"].split("-")[1]  # the simulator's ids name its port
                cached = obj["usage"]["prompt_tokens_details"]["cached_tokens"]
                print("%-8s %-30s %-8s %d of %d" % (name, q, engine, cached,
                                                    obj["usage"]["prompt_tokens"]))
        # One streamed answer through the gateway, its events as they arrive.
        c = http.client.HTTPConnection("127.0.0.1", lb_port, timeout=60)
        c.request("POST", "/v1/chat/completions", json.dumps({
            "model": MODEL, "max_tokens": 5, "stream": True,
            "messages": [{"role": "system", "content": systems["code"]},
                         {"role": "user", "content": "Stream it."}]}))
        r = c.getresponse()
        words = []
        for line in r:
            line = line.strip()
            if line.startswith(b"data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                words.append(delta.get("content", ""))
            elif line == b"data: [DONE]":
                words.append(" [DONE]")
        c.close()
        print("\na streamed answer through chring-lb:%s" % "".join(words))
        print("\n%-8s %8s %8s %10s" % ("engine", "queries", "hits", "hit rate"))
        for e in engines:
            m = metrics(e)
            q, h = m["vllm:prefix_cache_queries_total"], m["vllm:prefix_cache_hits_total"]
            print("%-8d %8d %8d %9.0f%%" % (e, q, h, 100 * h / q if q else 0))
        print("\nEach system prompt stays on one engine, whose prefix cache serves its later "
              "questions.\nThe benchmark: python3 bench/llm/bench.py --quick (docs/llm.md).")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
