#!/usr/bin/python3
"""Tests of the engine simulator bench/llm/engine.py (docs/llm.md, "The engine simulator").

Each test starts its own simulator on 127.0.0.1 (an ephemeral port, read back from its
--ready-file), talks to it with http.client and raw sockets, and stops it by its PID.  Every wait
is bounded in count and time; no assertion is about how fast anything ran.

    /usr/bin/python3 tests/llm/test_engine.py [-v] [TestName...]
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE = os.environ.get("LLM_ENGINE",
                        os.path.join(HERE, "..", "..", "bench", "llm", "engine.py"))
MODEL = "sim-llama-3.1-8b"
SYSTEM_A = ("You are the assistant of the Alpha company. " * 200)[:8192]  # 2048 tokens
SYSTEM_B = ("Answer as the Beta company's support desk does. " * 200)[:8192]


class Sim:
    """One simulator process with the given options, on ephemeral ports."""

    def __init__(self, *opts, engines=1):
        self.dir = tempfile.mkdtemp(prefix="llm-sim-")
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        ports = ",".join(str(free_port()) for _ in range(engines))
        self.proc = subprocess.Popen(
            [sys.executable, ENGINE, "--ports", ports, "--ready-file", ready] + list(opts),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise AssertionError("the simulator did not start: " + self.log.read())
            time.sleep(0.02)
        with open(ready) as f:
            self.ports = [int(p) for p in f.read().split()]
        self.port = self.ports[0]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def request(self, method, path, body=None, port=None):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=30)
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data is not None else {})
        r = c.getresponse()
        payload = r.read()
        c.close()
        return r, payload

    def metrics(self, port=None):
        r, payload = self.request("GET", "/metrics", port=port)
        assert r.status == 200, r.status
        samples = {}
        families = {}
        for fam in text_string_to_metric_families(payload.decode()):
            families[fam.name] = fam
            for s in fam.samples:
                if s.name.endswith("_bucket"):
                    continue
                samples[s.name] = s.value
        return samples, families


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def completion(prompt, max_tokens=4, **extra):
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens}
    body.update(extra)
    return body


def read_events(resp):
    """The SSE events of a streamed answer, as decoded data strings, until the answer ends."""
    events = []
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            assert ev.startswith(b"data: "), ev
            events.append(ev[6:].decode())
    assert buf == b"", buf
    return events


class ApiShape(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sim = Sim("--max-output", "64")

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()

    def test_plain_completion_has_text_and_usage(self):
        r, payload = self.sim.request("POST", "/v1/completions", completion("a" * 100, 5))
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Type"), "application/json")
        obj = json.loads(payload)
        self.assertEqual(obj["object"], "text_completion")
        self.assertEqual(obj["model"], MODEL)
        self.assertEqual(len(obj["choices"]), 1)
        self.assertEqual(obj["choices"][0]["finish_reason"], "length")
        self.assertEqual(len(obj["choices"][0]["text"].split()), 5)
        self.assertEqual(obj["usage"], {"prompt_tokens": 25, "completion_tokens": 5,
                                        "total_tokens": 30,
                                        "prompt_tokens_details": {"cached_tokens": 0}})

    def test_plain_chat_answers_a_message(self):
        body = {"model": MODEL, "max_tokens": 3,
                "messages": [{"role": "system", "content": "be brief"},
                             {"role": "user", "content": [{"type": "text", "text": "hi"},
                                                          {"type": "image_url",
                                                           "image_url": {"url": "x"}}]}]}
        r, payload = self.sim.request("POST", "/v1/chat/completions", body)
        self.assertEqual(r.status, 200)
        obj = json.loads(payload)
        self.assertEqual(obj["object"], "chat.completion")
        self.assertEqual(obj["choices"][0]["message"]["role"], "assistant")
        self.assertEqual(len(obj["choices"][0]["message"]["content"].split()), 3)
        # "system\nbe brief\nuser\nhi\n" is 24 bytes: 6 tokens.
        self.assertEqual(obj["usage"]["prompt_tokens"], 6)
        self.assertEqual(obj["usage"]["completion_tokens"], 3)

    def test_stream_sends_one_token_per_event_then_done(self):
        c = http.client.HTTPConnection("127.0.0.1", self.sim.port, timeout=30)
        c.request("POST", "/v1/completions",
                  json.dumps(completion("hello", 6, stream=True,
                                        stream_options={"include_usage": True})))
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"))
        self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
        events = read_events(r)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        tokens = [ch for ch in chunks if ch["choices"]]
        self.assertEqual(len(tokens), 6)
        for i, ch in enumerate(tokens):
            self.assertEqual(ch["object"], "text_completion")
            self.assertEqual(ch["choices"][0]["finish_reason"], "length" if i == 5 else None)
        usage = chunks[-1]
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"]["completion_tokens"], 6)
        self.assertEqual(usage["usage"]["prompt_tokens"], 2)
        # The connection is kept alive after a chunked stream: a second request on it works.
        c.request("GET", "/health")
        r2 = c.getresponse()
        r2.read()
        self.assertEqual(r2.status, 200)
        c.close()

    def test_chat_stream_has_role_then_content_deltas(self):
        c = http.client.HTTPConnection("127.0.0.1", self.sim.port, timeout=30)
        c.request("POST", "/v1/chat/completions",
                  json.dumps({"model": MODEL, "stream": True, "max_tokens": 3,
                              "messages": [{"role": "user", "content": "hi"}]}))
        events = read_events(c.getresponse())
        c.close()
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual(len(chunks), 3)  # no usage event unless asked for
        self.assertEqual(chunks[0]["object"], "chat.completion.chunk")
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertNotIn("role", chunks[1]["choices"][0]["delta"])
        self.assertEqual(chunks[2]["choices"][0]["finish_reason"], "length")

    def test_http10_stream_is_close_delimited(self):
        s = socket.create_connection(("127.0.0.1", self.sim.port), timeout=30)
        body = json.dumps(completion("x", 2, stream=True)).encode()
        s.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body))
        data = b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = s.recv(65536)
            if not got:
                break
            data += got
        s.close()
        head, _, rest = data.partition(b"\r\n\r\n")
        self.assertIn(b"Connection: close", head)
        self.assertNotIn(b"Transfer-Encoding", head)
        self.assertTrue(rest.endswith(b"data: [DONE]\n\n"), rest[-60:])
        self.assertEqual(rest.count(b"data: "), 3)

    def test_models_health_and_errors(self):
        r, payload = self.sim.request("GET", "/v1/models")
        self.assertEqual(r.status, 200)
        self.assertEqual([m["id"] for m in json.loads(payload)["data"]], [MODEL])
        r, _ = self.sim.request("GET", "/health")
        self.assertEqual(r.status, 200)
        r, payload = self.sim.request("POST", "/v1/completions",
                                      {"model": "other", "prompt": "x"})
        self.assertEqual(r.status, 404)
        self.assertIn("does not exist", json.loads(payload)["error"]["message"])
        r, payload = self.sim.request("POST", "/v1/completions", b"{not json")
        self.assertEqual(r.status, 400)
        r, _ = self.sim.request("POST", "/v1/completions", {"model": MODEL, "prompt": 7})
        self.assertEqual(r.status, 400)
        r, _ = self.sim.request("GET", "/v1/completions")
        self.assertEqual(r.status, 405)

    def test_chunked_request_body_is_read_and_bad_framing_refused(self):
        body = json.dumps(completion("chunked body", 2)).encode()
        for chunks, status in (([body[:10], body[10:]], b"200"), ([b"zz"], b"400")):
            s = socket.create_connection(("127.0.0.1", self.sim.port), timeout=30)
            data = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
            if status == b"400":
                data = b"zz\r\n"
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n" + data + b"0\r\n\r\n")
            got = b""
            while True:
                part = s.recv(65536)
                if not part:
                    break
                got += part
            s.close()
            self.assertTrue(got.startswith(b"HTTP/1.1 " + status), got[:80])

    def test_max_tokens_is_capped_by_max_output(self):
        r, payload = self.sim.request("POST", "/v1/completions", completion("x", 1000))
        self.assertEqual(json.loads(payload)["usage"]["completion_tokens"], 64)


class PrefixCache(unittest.TestCase):
    def setUp(self):
        self.sims = []

    def tearDown(self):
        for s in self.sims:
            s.stop()

    def start(self, *opts):
        s = Sim(*opts)
        self.sims.append(s)
        return s

    def chat(self, sim, system, question):
        body = {"model": MODEL, "max_tokens": 2,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": question}]}
        r, payload = sim.request("POST", "/v1/chat/completions", body)
        self.assertEqual(r.status, 200, payload)
        return json.loads(payload)["usage"]

    def test_shared_prefix_hits_and_other_prefix_misses(self):
        sim = self.start()
        before, _ = sim.metrics()
        u1 = self.chat(sim, SYSTEM_A, "What is the first question?")
        u2 = self.chat(sim, SYSTEM_A, "And a second, different one?")
        mid, _ = sim.metrics()
        u3 = self.chat(sim, SYSTEM_B, "What is the first question?")
        after, _ = sim.metrics()
        self.assertEqual(u1["prompt_tokens_details"]["cached_tokens"], 0)
        # "system\n" + 8192 bytes: 2049.75 tokens share the prefix, 128 full blocks of it.
        self.assertEqual(u2["prompt_tokens_details"]["cached_tokens"], 2048)
        self.assertEqual(u3["prompt_tokens_details"]["cached_tokens"], 0)
        q = "vllm:prefix_cache_queries_total"
        h = "vllm:prefix_cache_hits_total"
        self.assertEqual(mid[q] - before[q], u1["prompt_tokens"] + u2["prompt_tokens"])
        self.assertEqual(mid[h] - before[h], 2048)
        self.assertEqual(after[q] - mid[q], u3["prompt_tokens"])
        self.assertEqual(after[h] - mid[h], 0)
        self.assertEqual(after["vllm:prompt_tokens_total"],
                         u1["prompt_tokens"] + u2["prompt_tokens"] + u3["prompt_tokens"])

    def test_identical_prompt_recomputes_its_last_block(self):
        sim = self.start()
        prompt = "z" * (64 * 10)  # exactly 10 blocks
        r, p1 = sim.request("POST", "/v1/completions", completion(prompt, 1))
        r, p2 = sim.request("POST", "/v1/completions", completion(prompt, 1))
        self.assertEqual(json.loads(p2)["usage"]["prompt_tokens_details"]["cached_tokens"],
                         9 * 16)

    def test_a_block_hits_only_after_the_same_prefix(self):
        # Block hashes are chained: the same 64 bytes after a different prefix are another
        # block.  "x y y y" is cached; "y y y" starts with a block equal to x's second one.
        sim = self.start()
        x, y = "x" * 64, "y" * 64
        sim.request("POST", "/v1/completions", completion(x + y * 3 + "!", 1))
        r, payload = sim.request("POST", "/v1/completions", completion(y * 3 + "!", 1))
        self.assertEqual(json.loads(payload)["usage"]["prompt_tokens_details"]["cached_tokens"],
                         0)
        r, payload = sim.request("POST", "/v1/completions", completion(x + y * 2 + "?", 1))
        self.assertEqual(json.loads(payload)["usage"]["prompt_tokens_details"]["cached_tokens"],
                         48)

    def test_small_cache_evicts_the_least_recently_used_prefix(self):
        # 200 blocks: one 2048-token system prompt (129 blocks with its question) fits, two do not.
        sim = self.start("--kv-blocks", "200")
        self.chat(sim, SYSTEM_A, "q1")
        again = self.chat(sim, SYSTEM_A, "q2")
        self.assertEqual(again["prompt_tokens_details"]["cached_tokens"], 2048)
        self.chat(sim, SYSTEM_B, "q1")  # needs blocks: evicts most of A's
        after, _ = sim.metrics()
        self.assertLessEqual(after["sim:kv_cache_cached_blocks"], 200)
        a3 = self.chat(sim, SYSTEM_A, "q3")
        self.assertLess(a3["prompt_tokens_details"]["cached_tokens"], 2048)
        # B, used after A's second request, kept more of its blocks than A did.
        b2 = self.chat(sim, SYSTEM_B, "q2")
        self.assertGreater(b2["prompt_tokens_details"]["cached_tokens"], 0)
        # A request larger than the whole cache is refused, not queued for ever.
        r, _ = sim.request("POST", "/v1/completions", completion("y" * 64 * 210, 1))
        self.assertEqual(r.status, 400)

    def test_same_prefix_on_another_engine_misses(self):
        sim = Sim(engines=2)
        self.sims.append(sim)
        self.chat(sim, SYSTEM_A, "q1")
        body = {"model": MODEL, "max_tokens": 2,
                "messages": [{"role": "system", "content": SYSTEM_A},
                             {"role": "user", "content": "q2"}]}
        r, payload = sim.request("POST", "/v1/chat/completions", body, port=sim.ports[1])
        self.assertEqual(json.loads(payload)["usage"]["prompt_tokens_details"]["cached_tokens"], 0)


def open_stream(port, prompt, max_tokens):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    body = json.dumps(completion(prompt, max_tokens, stream=True)).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
              % (len(body), body))
    return s


def wait_metric(sim, pred, seconds=20):
    deadline = time.monotonic() + seconds
    seen = None
    while time.monotonic() < deadline:
        seen, _ = sim.metrics()
        if pred(seen):
            return seen
        time.sleep(0.05)
    raise AssertionError("condition not met within %ss; last metrics: %r" % (seconds, seen))


class TimeModel(unittest.TestCase):
    def test_steps_cost_base_per_request_and_per_uncached_prompt_token(self):
        # The modelled durations (not wall times): a lone request of a 2,048-token prompt and
        # 3 output tokens runs 3 steps, the first with its prefill; the same prompt again
        # prefills only its last block (16 tokens).
        base, per_seq, per_token, scale = 0.002, 0.0005, 0.00001, 1.5
        sim = Sim("--step-base", str(base), "--step-per-seq", str(per_seq),
                  "--prefill-per-token", str(per_token), "--time-scale", str(scale))
        try:
            prompt = "p" * (64 * 128)
            m0, _ = sim.metrics()
            sim.request("POST", "/v1/completions", completion(prompt, 3))
            m1, _ = sim.metrics()
            sim.request("POST", "/v1/completions", completion(prompt, 3))
            m2, _ = sim.metrics()
        finally:
            sim.stop()
        key = "sim:step_modelled_seconds_total"
        self.assertEqual(m1["sim:steps_total"] - m0["sim:steps_total"], 3)
        self.assertAlmostEqual(m1[key] - m0[key],
                               scale * (3 * base + 3 * per_seq + 2048 * per_token), places=9)
        self.assertAlmostEqual(m2[key] - m1[key],
                               scale * (3 * base + 3 * per_seq + 16 * per_token), places=9)

    def test_a_step_costs_more_with_more_requests_in_it(self):
        # Two streams of 30 tokens with 1-token prompts, however they overlap: every step costs
        # the base, each request costs per_seq in each of its 30 steps, each prompt one token.
        base, per_seq, per_token = 0.002, 0.0005, 0.00001
        sim = Sim("--step-base", str(base), "--step-per-seq", str(per_seq),
                  "--prefill-per-token", str(per_token), "--time-scale", "3")
        socks = []
        try:
            socks = [open_stream(sim.port, "abcd", 30), open_stream(sim.port, "efgh", 30)]
            for s in socks:
                data = b""
                deadline = time.monotonic() + 30
                while not data.endswith(b"0\r\n\r\n") and time.monotonic() < deadline:
                    got = s.recv(65536)
                    if not got:
                        break
                    data += got
            m, _ = sim.metrics()
        finally:
            for s in socks:
                s.close()
            sim.stop()
        steps = m["sim:steps_total"]
        self.assertGreaterEqual(steps, 30)
        self.assertLessEqual(steps, 60)
        self.assertAlmostEqual(m["sim:step_modelled_seconds_total"],
                               3 * (steps * base + 60 * per_seq + 2 * per_token), places=9)


class Queue(unittest.TestCase):
    def test_requests_beyond_max_num_seqs_wait(self):
        # Slow steps (time scale 10: 65 ms a step) so that the streams last while we look.
        sim = Sim("--max-num-seqs", "2", "--time-scale", "10")
        socks = []
        try:
            socks = [open_stream(sim.port, "p%d" % i, 40) for i in range(6)]
            m = wait_metric(sim, lambda m: m["vllm:num_requests_waiting"] == 4)
            self.assertEqual(m["vllm:num_requests_running"], 2)
            # Closing the clients aborts their requests and frees everything.
            for s in socks:
                s.close()
            m = wait_metric(sim, lambda m: m["vllm:num_requests_running"] == 0
                            and m["vllm:num_requests_waiting"] == 0)
            self.assertEqual(m["vllm:kv_cache_usage_perc"], 0.0)
            self.assertGreaterEqual(m["sim:requests_aborted_total"], 2)
        finally:
            for s in socks:
                s.close()
            sim.stop()

    def test_requests_wait_for_kv_blocks(self):
        # 100 blocks; each request holds 60 (its prompt and its output): only one runs at a time.
        sim = Sim("--kv-blocks", "100", "--time-scale", "10")
        socks = []
        try:
            socks = [open_stream(sim.port, "%d" % i * 64 * 40, 320) for i in range(2)]
            m = wait_metric(sim, lambda m: m["vllm:num_requests_running"] == 1
                            and m["vllm:num_requests_waiting"] == 1)
            self.assertGreater(m["vllm:kv_cache_usage_perc"], 0.5)
        finally:
            for s in socks:
                s.close()
            sim.stop()


class Metrics(unittest.TestCase):
    def test_metrics_parse_with_vllm_names_and_types(self):
        sim = Sim()
        try:
            sim.request("POST", "/v1/completions", completion("hello there", 3))
            samples, families = sim.metrics()
        finally:
            sim.stop()
        types = {name: fam.type for name, fam in families.items()}
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                     "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"):
            self.assertEqual(types.get(name), "gauge", name)
        for name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                     "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success"):
            self.assertEqual(types.get(name), "counter", name)
        self.assertEqual(types.get("vllm:time_to_first_token_seconds"), "histogram")
        fam = families["vllm:num_requests_running"]
        self.assertEqual(fam.samples[0].labels, {"model_name": MODEL})
        self.assertEqual(samples["vllm:generation_tokens_total"], 3)
        self.assertEqual(samples["vllm:prompt_tokens_total"], 3)
        self.assertEqual(samples["vllm:time_to_first_token_seconds_count"], 1)
        buckets = [s for s in families["vllm:time_to_first_token_seconds"].samples
                   if s.name.endswith("_bucket")]
        self.assertEqual(buckets[-1].labels["le"], "+Inf")
        self.assertEqual(buckets[-1].value, 1)


class Concurrency(unittest.TestCase):
    def test_hundreds_of_streams_complete(self):
        # 300 concurrent streams of 20 tokens on one engine: every one ends with [DONE].
        sim = Sim("--max-num-seqs", "512")
        socks = []
        try:
            socks = [open_stream(sim.port, "s%d" % i, 20) for i in range(300)]
            done = 0
            for s in socks:
                data = b""
                deadline = time.monotonic() + 60
                while not data.endswith(b"0\r\n\r\n") and time.monotonic() < deadline:
                    got = s.recv(65536)
                    if not got:
                        break
                    data += got
                if b"data: [DONE]" in data and data.count(b"data: ") == 21:
                    done += 1
            self.assertEqual(done, 300)
            m, _ = sim.metrics()
            self.assertEqual(m["vllm:request_success_total"], 300)
            self.assertEqual(m["vllm:generation_tokens_total"], 6000)
        finally:
            for s in socks:
                s.close()
            sim.stop()


if __name__ == "__main__":
    unittest.main()
