/* Unit tests of chring-lb's Prometheus text reader (lb/prom_read.c), on text written by the real
 * exporter (python3-prometheus-client, run as /usr/bin/python3) and on text written by hand.
 * Each test is named after what it proves.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "prom_read.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the exporter writes for gauges like vLLM's: labels with every escape, a tiny and a huge
 * exponent, NaN, +Inf, a counter (_total, _created), a sample with a timestamp, HELP text with
 * escapes. */
static const char exporter_script[] =
    "from prometheus_client import CollectorRegistry, Gauge, Counter, generate_latest\n"
    "from prometheus_client.core import GaugeMetricFamily\n"
    "r = CollectorRegistry()\n"
    "g = Gauge('vllm:num_requests_running', 'Running.\\nSecond \"line\" \\\\ here',"
    " ['model_name', 'engine'], registry=r)\n"
    "g.labels('llama \"3\" \\\\ 8b\\nx', '0').set(3)\n"
    "g.labels('other', '1').set(1.5e-7)\n"
    "w = Gauge('vllm:num_requests_waiting', 'waiting', ['model_name'], registry=r)\n"
    "w.labels('m').set(12)\n"
    "Gauge('nan_gauge', 'nan', registry=r).set(float('nan'))\n"
    "Gauge('inf_gauge', 'inf', registry=r).set(float('inf'))\n"
    "Counter('reqs', 'requests', registry=r).inc(1e21)\n"
    "class C:\n"
    "    def collect(self):\n"
    "        f = GaugeMetricFamily('ts_gauge', 'with a timestamp', labels=['a'])\n"
    "        f.add_metric(['x'], 42.0, timestamp=1700000000.123)\n"
    "        yield f\n"
    "r.register(C())\n"
    "import sys\n"
    "sys.stdout.write(generate_latest(r).decode())\n";

static char *exporter_text(size_t *len)
{
    char path[] = "/tmp/chring-prom-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(exporter_script, f);
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char buf[65536];
    *len = fread(buf, 1, sizeof buf - 1, p);
    int status = pclose(p);
    unlink(path);
    if (status != 0 || *len == 0)
        cr_skip_test("python3-prometheus-client is not installed (/usr/bin/python3)");
    buf[*len] = '\0';
    return buf;
}

struct seen {
    int n;
    char names[16][64];
    double values[16];
    int has_ts[16];
    long long ts[16];
    char model[16][64];
};

static int collect(const struct lb_prom_sample *s, void *ctx)
{
    struct seen *v = ctx;
    if (v->n >= 16)
        return 1;
    snprintf(v->names[v->n], sizeof v->names[v->n], "%.*s", (int)s->name_len, s->name);
    v->values[v->n] = s->value;
    v->has_ts[v->n] = s->has_timestamp;
    v->ts[v->n] = s->timestamp_ms;
    if (lb_prom_label(s->labels, s->labels_len, "model_name", v->model[v->n],
                      sizeof v->model[v->n]) < 0)
        v->model[v->n][0] = '\0';
    v->n++;
    return 0;
}

static int find(const struct seen *v, const char *name, const char *model)
{
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->names[i], name) == 0 && (model == NULL || strcmp(v->model[i], model) == 0))
            return i;
    return -1;
}

Test(prom, reads_every_sample_the_real_exporter_writes)
{
    size_t len;
    const char *text = exporter_text(&len);
    struct seen v = {0};
    const char *why;
    size_t line;
    long n = lb_prom_parse(text, len, collect, &v, &why, &line);
    cr_assert_eq(n, 8, "samples: %ld (%s at line %zu) in\n%s", n, why ? why : "-", line, text);
    /* Labels with \", \\ and \n, unescaped. */
    int i = find(&v, "vllm:num_requests_running", "llama \"3\" \\ 8b\nx");
    cr_assert_geq(i, 0, "the escaped label value");
    cr_assert_eq(v.values[i], 3.0);
    i = find(&v, "vllm:num_requests_running", "other");
    cr_assert_eq(v.values[i], 1.5e-7, "an exponent: %g", v.values[i]);
    cr_assert_eq(v.values[find(&v, "reqs_total", NULL)], 1e21);
    cr_assert(isnan(v.values[find(&v, "nan_gauge", NULL)]));
    cr_assert(isinf(v.values[find(&v, "inf_gauge", NULL)]));
    i = find(&v, "ts_gauge", NULL);
    cr_assert(v.has_ts[i] && v.ts[i] == 1700000000123LL, "the timestamp");
    cr_assert(!v.has_ts[find(&v, "vllm:num_requests_waiting", NULL)]);
}

Test(prom, sums_the_named_gauges_and_skips_nan_and_inf)
{
    size_t len;
    const char *text = exporter_text(&len);
    const char *names[] = {"vllm:num_requests_running", "vllm:num_requests_waiting"};
    double sum;
    size_t skipped, line;
    const char *why;
    cr_assert_eq(lb_prom_sum(text, len, names, 2, &sum, &skipped, &why, &line), 3);
    cr_assert_float_eq(sum, 15.00000015, 1e-12);
    cr_assert_eq(skipped, 0);
    const char *odd[] = {"nan_gauge", "inf_gauge"};
    cr_assert_eq(lb_prom_sum(text, len, odd, 2, &sum, &skipped, &why, &line), 0);
    cr_assert_eq(skipped, 2, "NaN and +Inf report nothing");
    const char *none[] = {"sglang:num_queue_reqs"};
    cr_assert_eq(lb_prom_sum(text, len, none, 1, &sum, &skipped, &why, &line), 0,
                 "a text that names none of the gauges reports nothing");
}

Test(prom, accepts_the_format_written_by_hand)
{
    const char text[] = "# a comment\r\n"
                        "\n"
                        "   \t\n"
                        "sglang:num_running_reqs 4\r\n"
                        "sglang:num_queue_reqs{} 2.5e1 -12\n"
                        "sglang:num_queue_reqs{a=\"1\",} +7E-1\n"
                        "x{ a = \"\" , b=\"}\" } -0.0";
    const char *names[] = {"sglang:num_running_reqs", "sglang:num_queue_reqs"};
    double sum;
    size_t skipped, line;
    const char *why;
    cr_assert_eq(lb_prom_sum(text, sizeof text - 1, names, 2, &sum, &skipped, &why, &line), 3,
                 "%s at %zu", why ? why : "-", line);
    cr_assert_float_eq(sum, 29.7, 1e-12);
    char out[8];
    struct seen v = {0};
    cr_assert_eq(lb_prom_parse(text, sizeof text - 1, collect, &v, &why, &line), 4);
    cr_assert_eq(lb_prom_label("a=\"x\\\"y\"", 8, "a", out, sizeof out), 3);
    cr_assert_str_eq(out, "x\"y");
    cr_assert_eq(lb_prom_label("a=\"x\"", 5, "b", out, sizeof out), -1);
    cr_assert_eq(lb_prom_label("a=\"toolongvalue\"", 16, "a", out, sizeof out), -2);
}

Test(prom, refuses_malformed_lines_with_their_number)
{
    static const struct {
        const char *text;
        size_t line;
    } bad[] = {
        {"9x 1\n", 1},
        {"ok 1\nx{a=1} 2\n", 2},
        {"x{a=\"1\" 2\n", 1},
        {"x{a=\"\\t\"} 2\n", 1},
        {"x 0x10\n", 1},
        {"x infinity\n", 1},
        {"x\n", 1},
        {"x 1 2 3\n", 1},
        {"x 1 12.5\n", 1},
        {"x{=\"a\"} 1\n", 1},
        {"# fine\nx{a=\"b\"c=\"d\"} 1\n", 2},
        {"x 1e\n", 1},
        {"x .\n", 1},
        {"x{a=\"b\"}1\n", 1},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *why;
        size_t line;
        long n = lb_prom_parse(bad[k].text, strlen(bad[k].text), NULL, NULL, &why, &line);
        cr_assert_eq(n, -1, "accepted %s", bad[k].text);
        cr_assert_not_null(why);
        cr_assert_eq(line, bad[k].line, "%s: line %zu", bad[k].text, line);
    }
    const char nul[] = "x 1\nx\0 2\n";
    const char *why;
    size_t line;
    cr_assert_eq(lb_prom_parse(nul, sizeof nul - 1, NULL, NULL, &why, &line), -1);
}
