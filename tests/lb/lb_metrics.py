#!/usr/bin/python3
"""What an operator of chring-lb reads (docs/lb.md, "Statistics" and "Metrics"): the stats'
summary and pages, and GET /_chring/metrics in Prometheus' text format, read strictly by
prometheus_client's parser and scraped by a real Prometheus.  Run with /usr/bin/python3: Debian's
python3-prometheus-client imports only there.

  text        the metrics text parsed strictly: HELP and TYPE for every family, counters named
              ..._total, a series per member whose values are the stats JSON's, members=0
              without them; /_chring/stats?members=0 (the summary) and pages OFFSET,COUNT that
              put the whole member list back together; malformed values 400; the metrics
              under the stats' access rules
  etcd        with --etcd (tests/lb/fake_etcd.py): the feed's families, the same numbers as the
              stats' etcd object, its state as a label
  prometheus  a real Prometheus (Debian's prometheus) scrapes the balancer every second; its
              API answers up 1, a counter's rate above 0 while requests flow, and a per-member
              gauge for every member
"""
import json
import os
import shutil
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402

PROMETHEUS = os.environ.get("PROMETHEUS") or shutil.which("prometheus") or "/usr/bin/prometheus"


def get(port, path, timeout=10):
    c = h.Client(port, timeout=timeout)
    try:
        st, body, r = c.get(path)
        return st, body, r
    finally:
        c.close()


def parse(text):
    """The families of an exposition text, by prometheus_client's parser (it raises on a line it
    cannot read); checks the rules the parser lets pass."""
    from prometheus_client.parser import text_string_to_metric_families
    fams = {}
    for f in text_string_to_metric_families(text):
        check(f.name not in fams, "family %s twice" % f.name)
        fams[f.name] = f
    helps = [l.split(" ")[2] for l in text.splitlines() if l.startswith("# HELP ")]
    types = {l.split(" ")[2]: l.split(" ")[3] for l in text.splitlines() if l.startswith("# TYPE ")}
    samples = set(l.split("{")[0].split(" ")[0] for l in text.splitlines() if l and not l.startswith("#"))
    for name in samples:
        check(name in types and name in helps, "%s has no HELP or TYPE line" % name)
    for name, t in types.items():
        check(name.startswith("chring_lb_"), "%s: not chring_lb_..." % name)
        check((t == "counter") == name.endswith("_total"), "%s: a %s named so" % (name, t))
    return fams


def value(fams, name, labels=None):
    base = name[:-6] if name.endswith("_total") and name[:-6] in fams else name
    for s in fams[base].samples:
        if s.name == name and (labels is None or s.labels == labels):
            return s.value
    raise h.TestFailure("no sample %s %s" % (name, labels))


def text_test(env):
    bes = [h.Backend(env, i).start() for i in range(2)]
    members = [b.member for b in bes] + ["127.0.0.1:%d" % h.free_port() for _ in range(3)]
    lb = h.Balancer(env, sum((["--backend", m] for m in members), []), stats_listen=True).start()
    c = h.Client(lb.port)
    for i in range(40):
        c.get("/k/%d" % i)
    c.close()
    st, body, r = get(lb.stats_port, "/_chring/metrics")
    check(st == 200, "metrics answered %d" % st)
    check(r.getheader("Content-Type", "").startswith("text/plain; version=0.0.4"),
          "Content-Type %r" % r.getheader("Content-Type"))
    fams = parse(body.decode())
    stats = lb.stats()
    for m in stats["members"]:
        lab = {"member": m["name"]}
        for fam, key in (("chring_lb_member_load", "load"), ("chring_lb_member_capacity", "capacity"),
                         ("chring_lb_member_weight", "weight"),
                         ("chring_lb_member_requests_total", "requests"),
                         ("chring_lb_member_failures_total", "failures")):
            check(value(fams, fam, lab) == m[key], "%s %s: %s, stats %s" % (fam, m["name"], value(fams, fam, lab), m[key]))
        check(value(fams, "chring_lb_member_down", lab) == (1 if m["down"] else 0), "down %s" % m["name"])
    check(value(fams, "chring_lb_ring_members") == 5, "ring members")
    check(value(fams, "chring_lb_ring_points") == stats["ring"]["points"], "ring points")
    check(value(fams, "chring_lb_proxied_total") == stats["balancer"]["proxied"] >= 30,
          "proxied %s / %s" % (value(fams, "chring_lb_proxied_total"), stats["balancer"]["proxied"]))
    check(value(fams, "chring_lb_connections_max") == stats["limits"]["max_conns"], "max conns")
    log("metrics: %d families, %d lines" % (len(fams), body.count(b"\n")))
    st, body, _ = get(lb.stats_port, "/_chring/metrics?members=0")
    small = parse(body.decode())
    check(st == 200 and not [n for n in small if n.startswith("chring_lb_member_")] and
          "chring_lb_requests" in small, "metrics?members=0: %s" % sorted(small))
    # the summary and the pages of the stats
    st, body, _ = get(lb.stats_port, "/_chring/stats?members=0")
    summ = json.loads(body)
    check(st == 200 and summ["members"] == [] and summ["members_total"] == 5 and
          summ["ring"]["members"] == 5 and "balancer" in summ and "limits" in summ,
          "summary: %s" % body[:300])
    names = []
    for off in range(0, 6, 2):
        st, body, _ = get(lb.stats_port, "/_chring/stats?members=%d,2" % off)
        page = json.loads(body)
        check(st == 200 and page["members_offset"] == off and page["members_total"] == 5, "page %d" % off)
        names += [m["name"] for m in page["members"]]
    full = [m["name"] for m in lb.stats()["members"]]
    check(names == full, "pages %s, whole list %s" % (names, full))
    st, body, _ = get(lb.stats_port, "/_chring/stats?members=9,2")
    check(st == 200 and json.loads(body)["members"] == [], "a page past the end")
    for bad in ("members=5", "members=-1,2", "members=1,", "members=,2", "members=1,2,3",
                "members=%2B1,2", "members=1%2C2", "members=99999999999999999999,1"):
        for path in ("/_chring/stats?", "/_chring/metrics?"):
            st, _, _ = get(lb.stats_port, path + bad)
            check(st == 400, "%s%s answered %d" % (path, bad, st))
    # the access rules: the main listener does not serve it with --stats-listen
    st, _, _ = get(lb.port, "/_chring/metrics")
    check(st == 404, "metrics on the main listener with --stats-listen: %d" % st)
    lb.stop()
    lb = h.Balancer(env, ["--backend", members[0], "--stats-allow", "192.0.2.1"], name="lb-refused",
                    stats_listen=True)
    lb.proc = env.spawn(lb.name, lb.argv)
    h.wait_port(lb.port, proc=lb.proc)
    # the stats listener opens on the main thread once the workers listen: wait for it too
    end = time.time() + 10
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", lb.stats_port), timeout=5)
            break
        except ConnectionRefusedError:
            check(time.time() < end and lb.alive(), "the stats listener never opened")
            time.sleep(0.05)
    s.sendall(b"GET /_chring/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    try:
        got = s.recv(100)
    except OSError:
        got = b""
    s.close()
    check(got == b"", "a peer outside --stats-allow read the metrics: %r" % got)
    lb.stop()
    lb = h.Balancer(env, ["--backend", members[0], "--stats-allow", "192.0.2.1"], name="lb-main")
    lb.proc = env.spawn(lb.name, lb.argv)
    h.wait_port(lb.port, proc=lb.proc)
    st, _, _ = get(lb.port, "/_chring/metrics")
    check(st == 403, "metrics on the main listener outside --stats-allow: %d" % st)
    lb.stop()


def etcd_test(env):
    from fake_etcd import FakeEtcd
    srv = FakeEtcd()
    try:
        srv.members = {"10.7.0.%d:80" % i: 1 for i in range(1, 6)}
        lb = h.Balancer(env, ["--etcd", srv.url], stats_listen=True).start()
        end = time.time() + 30
        while time.time() < end and lb.stats().get("etcd", {}).get("state") != "watching":
            time.sleep(0.1)
        srv.send([srv.put_event("10.7.0.9:80", 2)])
        while time.time() < end and lb.stats()["ring"]["members"] != 6:
            time.sleep(0.1)
        e = lb.stats()["etcd"]
        st, body, _ = get(lb.stats_port, "/_chring/metrics?members=0")
        fams = parse(body.decode())
        check(value(fams, "chring_lb_etcd_state", {"state": "watching"}) == 1, "state")
        check(value(fams, "chring_lb_etcd_applied") == 1, "applied")
        for key, name in (("members", "chring_lb_etcd_members"), ("revision", "chring_lb_etcd_revision"),
                          ("points", "chring_lb_etcd_points"), ("ranges", "chring_lb_etcd_ranges_total"),
                          ("batches", "chring_lb_etcd_batches_total"), ("events", "chring_lb_etcd_events_total"),
                          ("errors", "chring_lb_etcd_errors_total"), ("refused", "chring_lb_etcd_refused_total")):
            check(value(fams, name) == e[key], "%s %s, stats %s" % (name, value(fams, name), e[key]))
        check(e["members"] == 6 and e["batches"] >= 1, "etcd stats %s" % e)
        log("etcd families: %s" % sorted(n for n in fams if n.startswith("chring_lb_etcd")))
        lb.stop()
    finally:
        srv.close()


def prom_query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(url, timeout=5) as r:
        d = json.loads(r.read())
    check(d.get("status") == "success", "prometheus: %s" % d)
    return d["data"]["result"]


def prometheus_test(env):
    bes = [h.Backend(env, i).start() for i in range(3)]
    lb = h.Balancer(env, sum((["--backend", b.member] for b in bes), []), stats_listen=True).start()
    pport = h.free_port()
    conf = env.path("prometheus.yml")
    with open(conf, "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                "  - job_name: chring-lb\n"
                "    metrics_path: /_chring/metrics\n"
                "    static_configs: [{targets: ['127.0.0.1:%d']}]\n" % lb.stats_port)
    os.makedirs(env.path("tsdb"))
    prom = env.spawn("prometheus", [PROMETHEUS, "--config.file=" + conf,
                                    "--storage.tsdb.path=" + env.path("tsdb"),
                                    "--web.listen-address=127.0.0.1:%d" % pport])
    stop = threading.Event()

    def traffic():
        c = h.Client(lb.port)
        i = 0
        while not stop.is_set():
            c.get("/t/%d" % (i % 50))
            i += 1
            time.sleep(0.01)
        c.close()

    t = threading.Thread(target=traffic)
    t.start()
    try:
        h.wait_port(pport, timeout=30, proc=prom)
        end = time.time() + 60
        up = rate = loads = None
        while time.time() < end:
            try:
                up = prom_query(pport, 'up{job="chring-lb"}')
                rate = prom_query(pport, 'rate(chring_lb_requests_total{job="chring-lb"}[5s])')
                loads = prom_query(pport, 'chring_lb_member_load{job="chring-lb"}')
            except OSError:
                time.sleep(0.5)
                continue
            if (up and up[0]["value"][1] == "1" and rate and float(rate[0]["value"][1]) > 0
                    and len(loads) == 3):
                break
            time.sleep(0.5)
        log("prometheus: up %s, rate %s, member loads %s" %
            (up and up[0]["value"][1], rate and rate[0]["value"][1],
             loads and sorted(r["metric"]["member"] for r in loads)))
        check(up and up[0]["value"][1] == "1", "up is not 1: %s" % up)
        check(rate and float(rate[0]["value"][1]) > 0, "the requests' rate: %s" % rate)
        check(loads and sorted(r["metric"]["member"] for r in loads) == sorted(b.member for b in bes),
              "per-member gauges: %s" % loads)
    finally:
        stop.set()
        t.join(10)
        env.stop(prom)
    lb.stop()


TESTS = {"text": text_test, "etcd": etcd_test, "prometheus": prometheus_test}



def extra_needs(case):
    """What a case needs besides chring-lb: the parser of python3-prometheus-client (every case),
    a Prometheus (the case prometheus)."""
    try:
        import prometheus_client.parser  # noqa: F401
    except ImportError:
        return "python3-prometheus-client (not importable by %s)" % sys.executable
    if case == "prometheus" and not os.access(PROMETHEUS, os.X_OK):
        return "%s (Debian package prometheus)" % PROMETHEUS
    return None


if __name__ == "__main__":
    sys.exit(h.main(TESTS, extra_needs=extra_needs))
