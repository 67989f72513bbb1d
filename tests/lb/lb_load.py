#!/usr/bin/env python3
"""chring-lb's --load-metrics through the real binary (docs/lb.md, "Load the engines report").

    lb_load.py metrics

Three engines stand-ins (Python HTTP servers on 127.0.0.1) answer every request with their port
and serve /metrics in Prometheus text with vLLM's gauges.  chring-lb scrapes them every 50 ms:
  1. idle engines (0 running, 0 waiting): every key goes to its owner, every member reports 0;
  2. one engine reports a waiting queue of 500 (load from clients chring-lb does not see): the
     stats show it, and its keys go to other engines (its count, 500, is far above its capacity);
  3. its /metrics fails (500): no report, the last one expires (1 s), and its keys come back.
Every wait is bounded; everything is stopped at the end.  Exit 0 pass, 1 fail.
"""
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402


class Engine:
    def __init__(self):
        outer = self
        self.running, self.waiting, self.broken, self.scrapes = 0, 0, False, 0

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path == "/metrics":
                    outer.scrapes += 1
                    if outer.broken:
                        body, code = b"engine metrics broken\n", 500
                    else:
                        body = ("# HELP vllm:num_requests_running Running.\n"
                                "# TYPE vllm:num_requests_running gauge\n"
                                'vllm:num_requests_running{model_name="m"} %d.0\n'
                                "# HELP vllm:num_requests_waiting Waiting.\n"
                                "# TYPE vllm:num_requests_waiting gauge\n"
                                'vllm:num_requests_waiting{model_name="m"} %d.0\n'
                                % (outer.running, outer.waiting)).encode()
                        code = 200
                else:
                    body, code = ("%d\n" % outer.port).encode(), 200
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.port = h.free_port()
        self.srv = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.srv.daemon_threads = True
        self.member = "127.0.0.1:%d" % self.port
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def member_stats(lb, name):
    for m in lb.stats()["members"]:
        if m["name"] == name:
            return m
    raise h.TestFailure("no member %s in the stats" % name)


def test_load(env):
    engines = [Engine() for _ in range(3)]
    try:
        args = []
        for e in engines:
            args += ["--backend", e.member]
        args += ["--load-metrics", "/metrics", "--load-interval", "0.05"]
        lb = h.Balancer(env, args, threads=1).start()
        c = h.Client(lb.port)
        by_port = {e.port: e for e in engines}

        # 1. idle: reports of 0, every key on its owner
        h.wait_until("every member to report 0",
                 lambda: all(member_stats(lb, e.member)["reported"] == 0 for e in engines))
        owners = {}
        for i in range(60):
            s, body, _ = c.get("/k/%d" % i)
            check(s == 200, "GET /k/%d: %d" % (i, s))
            owners[i] = by_port[h.port_of(body)]
        victim = engines[0]
        its = [i for i in owners if owners[i] is victim]
        check(len(its) >= 3, "the first engine owns %d of 60 keys" % len(its))
        log("idle: %d keys, %d owned by %s" % (len(owners), len(its), victim.member))

        # 2. a waiting queue of 500 on the victim: its keys go elsewhere
        victim.waiting = 500
        m = h.wait_until("the victim's report of 500",
                     lambda: (lambda m: m if m["reported"] == 500 else None)(
                         member_stats(lb, victim.member)))
        check(m["counted"] >= 500 and m["report_age_ms"] < 1000,
              "victim stats while loaded: %s" % m)
        # the same in Prometheus' text: the report, its age and what the bound counts
        mc = h.Client(lb.stats_port)
        s, text, _ = mc.get("/_chring/metrics")
        mc.close()
        text = text.decode()
        want = 'chring_lb_member_reported_load{member="%s"} 500' % victim.member
        check(s == 200 and want in text, "metrics lack %r" % want)
        check('chring_lb_member_report_age_seconds{member="%s"}' % victim.member in text and
              'chring_lb_member_counted{member="%s"}' % victim.member in text,
              "metrics lack the report's age or the counted load")
        moved = 0
        for i in its:
            s, body, _ = c.get("/k/%d" % i)
            check(s == 200, "GET /k/%d: %d" % (i, s))
            moved += by_port[h.port_of(body)] is not victim
        check(moved == len(its), "%d of %d keys left the loaded engine" % (moved, len(its)))
        log("queue of 500: all %d of its keys went to other engines; stats %s" % (moved, m))

        # 3. its /metrics fails: the report expires, the keys come back
        victim.broken = True
        h.wait_until("the victim's report to expire",
                 lambda: member_stats(lb, victim.member)["reported"] is None)
        for i in its:
            s, body, _ = c.get("/k/%d" % i)
            check(s == 200 and by_port[h.port_of(body)] is victim,
                  "key %d back on its owner after the report expired" % i)
        m = member_stats(lb, victim.member)
        check(m["counted"] == m["load"], "no report counts: %s" % m)
        mc = h.Client(lb.stats_port)
        s, text, _ = mc.get("/_chring/metrics")
        mc.close()
        check('chring_lb_member_reported_load{member="%s"}' % victim.member not in text.decode(),
              "an expired report still has a sample")
        log("metrics failing: the report expired, the keys are back; scrapes %d" % victim.scrapes)
        c.close()
        lb.stop()
    finally:
        for e in engines:
            e.close()


TESTS = {"metrics": test_load}

if __name__ == "__main__":
    sys.exit(h.main(TESTS))
