/* chring-lb: the command-line options and their defaults.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "config.h"
#include "allow.h"
#include "members.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lb_config lb_cfg;

#define STR_(x) #x
#define STR(x) STR_(x) /* a macro's value as a string literal */

/* Whether chring-lb takes profile p: every profile of the library's table (chring_profile_info)
 * but custom (no hash function to give) and those whose member names must be server ids
 * (haproxy: chring-lb's names are HOST:PORT). */
static bool profile_usable(chring_profile_t p)
{
    chring_profile_info_t info;
    return p != CHRING_PROFILE_CUSTOM && chring_profile_info(p, &info) == 0 && !info.names_are_ids;
}

/* "hash64, murmur32, ...": the profiles chring-lb takes, from the library's table, so that a new
 * profile appears in --help and in the error message without an edit here. */
static const char *profile_list(void)
{
    static char buf[512];
    size_t n = 0;
    buf[0] = '\0';
    for (int p = 0; p < CHRING_PROFILE_COUNT; p++) {
        if (!profile_usable((chring_profile_t)p))
            continue;
        int w = snprintf(buf + n, sizeof buf - n, "%s%s", n ? ", " : "",
                         chring_profile_name((chring_profile_t)p));
        if (w < 0 || (size_t)w >= sizeof buf - n)
            break;
        n += (size_t)w;
    }
    return buf;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: chring-lb [options] --backend HOST:PORT[=WEIGHT]... | --members FILE | --etcd URL\n"
        "  --listen HOST:PORT        listen address (default 127.0.0.1:8080)\n"
        "  --threads N               worker threads (default: one per core)\n"
        "  --backend HOST:PORT[=W]   a backend (repeatable); its member name is HOST:PORT as "
        "written\n"
        "  --members FILE            backends, one HOST:PORT[=W] per line, '#' comments;\n"
        "                            re-read on SIGHUP, its differences applied with one\n"
        "                            chring_update\n"
        "  --key path|header:NAME|query:NAME|prompt   routing key (default path); prompt:\n"
        "                            the model and the prompt of an OpenAI-compatible JSON body\n"
        "                            (/v1/completions, /v1/chat/completions)\n"
        "  --key-prefix N            route by the key's first N bytes (--key prompt: default\n"
        "                            " STR(LB_PROMPT_DEFAULT_PREFIX) ", the model and the prompt's first block)\n"
        "");
    /* two pieces: one string literal of over 4095 bytes is past what C99 compilers must take */
    fprintf(
        f,
        "  --profile NAME            placement profile (default hash64), one of:\n"
        "                            %s\n"
        "  --vnodes N                points per unit of weight (default 160)\n"
        "  --balance C               bounded-load factor c (default 1.25)\n"
        "  --min-capacity N          a floor under the bound: a backend of weight 1 takes N\n"
        "                            requests in flight before its keys spill, whatever the\n"
        "                            load (default 0: the bound alone)\n"
        "  --backend-timeout SECS    deadline for a backend's answer head; then its body's idle\n"
        "                            timeout: a body that keeps flowing (a token stream) is\n"
        "                            never cut (default 3)\n"
        "  --client-timeout SECS     client connections: idle timeout, and the deadline for a\n"
        "                            whole request head, or body (default 15)\n"
        "  --body-min-rate BYTES     a request body extends its deadline by 1 s per BYTES\n"
        "                            received (default 65536; 0: no extension)\n"
        "  --send-min-rate BYTES     while an answer waits for the client to take it, the client\n"
        "                            may keep it waiting --client-timeout plus 1 s per BYTES it\n"
        "                            took (default 16384; 0: only --client-timeout without any\n"
        "                            progress)\n"
        "  --members-max-points N    --backend plus --members: points in all, weights x vnodes\n"
        "                            (default 16777216): a file above is refused\n",
        profile_list());
    fprintf(
        f,
        "  --fail-timeout SECS       after a failure, send a backend's keys to their next replica\n"
        "                            for this long without trying it (default 1; 0: off): it is\n"
        "                            down in the ring (chring_set_down), then up again; at most\n"
        "                            half of the members at once (docs/lb.md)\n"
        "  --slow-start SECS         a backend that joins a running ring (reload, etcd) ramps\n"
        "                            its admission scale from 0.1 to 1 over SECS (default 0: off)\n"
        "  --drain SECS              a backend that leaves ramps to 0 over SECS and leaves the\n"
        "                            ring when its load is 0, or after SECS (default 0: at once)\n"
        "  --etcd http://HOST:PORT   read the backends from etcd (v3 JSON gateway): range, then\n"
        "                            watch; --backend/--members are the starting list\n"
        "  --etcd-prefix PREFIX      one key per backend, PREFIX HOST:PORT, value the weight\n"
        "                            (empty: 1); default /chring/pool/\n"
        "  --etcd-max-answer BYTES   largest range answer or watch message (default 67108864)\n"
        "  --etcd-max-points N       etcd's members' points in all, weights x vnodes\n"
        "                            (default 16777216): a change above is refused\n"
        "  --spare-blocks N          ring-sized blocks kept at rest for the next change (0..6,\n"
        "                            default 1): a change after a quiet while copies into one\n"
        "                            instead of zeroing a fresh block; 0 gives the memory back\n"
        "  --etcd-range-timeout SECS a range answer must arrive whole within (default 10)\n"
        "  --max-headers BYTES       largest request header block (default 8192)\n"
        "  --max-body BYTES          largest request body, buffered (default 16777216)\n"
        "  --max-idle N              idle backend connections per backend per thread (default 64)\n"
        "  --max-conns N             client connections in all; at the limit accepting pauses\n"
        "                            (default: (RLIMIT_NOFILE - 64) / 2)\n"
        "  --max-requests N          requests in flight in all; above: 503 (default 4096)\n"
        "  --max-body-total BYTES    request body bytes buffered in all; above: 503\n"
        "                            (default 268435456)\n"
        "  --stats-listen HOST:PORT  serve /_chring/ (stats, metrics, status page) only there,\n"
        "                            on the main thread\n"
        "  --stats-allow LIST        peers allowed to /_chring/: any, or CIDRs separated by "
        "commas\n"
        "                            (default 127.0.0.0/8,::1 on --stats-listen); given, it\n"
        "                            also opens /_chring/ on the main listener to them, except\n"
        "                            for requests a proxy forwarded\n"
        "  --outcome-header          add X-Chring-Outcome: owner, spilled or saturated (how the\n"
        "                            answering backend was chosen) to proxied answers; it tells\n"
        "                            clients about the backends' load (default: off)\n"
        "  --verbose                 log retries and retirements\n"
        "Timeouts are seconds, at least 0.001 (1 ms).\n"
        "GET /_chring/stats answers the ring's and every member's statistics as JSON\n"
        "(?members=0: the summary; ?members=OFFSET,COUNT: a page of members);\n"
        "GET /_chring/metrics the same in Prometheus' text format;\n"
        "GET /_chring/ is a status page drawing them.\n");
    /* The load the engines report (loadmetrics.c): a literal of its own (C99's 4095 bytes). */
    fprintf(f,
        "  --load-metrics PATH       scrape every backend's Prometheus text at PATH and report\n"
        "                            the sum of --load-metric's gauges to the ring as its load\n"
        "                            (chring_report_load; default: off)\n"
        "  --load-interval SECS      how often (default 0.1)\n"
        "  --load-metric NAMES       gauges summed, comma-separated (default\n"
        "                            vllm:num_requests_running,vllm:num_requests_waiting)\n"
        "                            (SGLang: sglang:num_running_reqs,sglang:num_queue_reqs)\n");
}

/* Prints "chring-lb: <message>" on standard error.  Returns -1 for the caller to return. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    fprintf(stderr, "chring-lb: %s\n", msg ? msg : "out of memory");
    free(msg);
    return -1;
}

/* Seconds, at most a day: at least 1 ms (a timer's resolution here; a smaller value would round
 * to no timeout at all), or 0 too when zero_ok.  Returns 0 / -1. */
static int parse_seconds(const char *s, bool zero_ok, double *out)
{
    char *end;
    double d = strtod(s, &end);
    if (end == s || *end || !(d >= 0.001 || (zero_ok && d == 0)) || d > 86400)
        return -1;
    *out = d;
    return 0;
}

static int parse_timeval(const char *s, struct timeval *tv)
{
    double d;
    if (parse_seconds(s, false, &d) < 0)
        return -1;
    tv->tv_sec = (time_t)d;
    tv->tv_usec = (suseconds_t)((d - (double)tv->tv_sec) * 1e6);
    return 0;
}

static int parse_size(const char *s, size_t *out, size_t lo, size_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v < lo || v > hi)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_key(const char *arg)
{
    if (strcmp(arg, "path") == 0) {
        lb_cfg.key_kind = KEY_PATH;
    } else if (strncmp(arg, "header:", 7) == 0 && arg[7]) {
        lb_cfg.key_kind = KEY_HEADER;
        lb_cfg.key_name = arg + 7;
    } else if (strncmp(arg, "query:", 6) == 0 && arg[6]) {
        lb_cfg.key_kind = KEY_QUERY;
        lb_cfg.key_name = arg + 6;
    } else if (strcmp(arg, "prompt") == 0) {
        lb_cfg.key_kind = KEY_PROMPT;
    } else {
        return bad("--key: path, header:NAME, query:NAME or prompt");
    }
    return 0;
}

static void set_defaults(void)
{
    snprintf(lb_cfg.listen_host, sizeof lb_cfg.listen_host, "127.0.0.1");
    lb_cfg.listen_port = 8080;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    lb_cfg.threads = ncpu > 0 ? (unsigned)ncpu : 1;
    lb_cfg.key_kind = KEY_PATH;
    lb_cfg.profile = CHRING_PROFILE_HASH64;
    lb_cfg.vnodes = CHRING_DEFAULT_VNODES;
    lb_cfg.balance = CHRING_DEFAULT_BALANCE;
    lb_cfg.backend_timeout = (struct timeval){3, 0};
    lb_cfg.client_timeout = (struct timeval){15, 0};
    lb_cfg.max_headers = 8192;
    lb_cfg.max_body = 16u << 20;
    lb_cfg.body_min_rate = 65536;
    lb_cfg.send_min_rate = 16384;
    lb_cfg.members_max_points = (uint64_t)1 << 24;
    lb_cfg.max_idle = 64;
    lb_cfg.high_water = 256u << 10;
    lb_cfg.fail_timeout_ms = 1000;
    lb_cfg.max_conns = 0; /* lb_limits_init derives it from RLIMIT_NOFILE */
    lb_cfg.max_requests = 4096;
    lb_cfg.max_body_total = 256u << 20;
    lb_cfg.etcd_prefix = "/chring/pool/";
    lb_cfg.load_interval = 0.1;
    lb_cfg.load_metric = "vllm:num_requests_running,vllm:num_requests_waiting";
    lb_cfg.etcd_max_answer = (size_t)64 << 20;
    lb_cfg.etcd_max_points = (uint64_t)1 << 24;
    lb_cfg.etcd_range_timeout_ms = 10000;
    lb_cfg.spare_blocks = 1;
}

enum {
    O_LISTEN = 256,
    O_THREADS,
    O_BACKEND,
    O_MEMBERS,
    O_KEY,
    O_KEYPREFIX,
    O_PROFILE,
    O_VNODES,
    O_BALANCE,
    O_MINCAPACITY,
    O_BTIMEOUT,
    O_CTIMEOUT,
    O_FAILTIMEOUT,
    O_MAXHDR,
    O_MAXBODY,
    O_BODYRATE,
    O_MAXIDLE,
    O_VERBOSE,
    O_MAXCONNS,
    O_MAXREQS,
    O_MAXBODYTOTAL,
    O_STATSLISTEN,
    O_STATSALLOW,
    O_SLOWSTART,
    O_DRAIN,
    O_ETCD,
    O_ETCDPREFIX,
    O_ETCDMAXANSWER,
    O_ETCDMAXPOINTS,
    O_ETCDRANGETIMEOUT,
    O_OUTCOMEHEADER,
    O_SENDRATE,
    O_MEMBERSMAXPOINTS,
    O_LOADMETRICS,
    O_LOADINTERVAL,
    O_LOADMETRIC,
    O_SPAREBLOCKS,
    O_HELP
};

static const struct option opts[] = {
    {"listen", required_argument, 0, O_LISTEN},
    {"threads", required_argument, 0, O_THREADS},
    {"backend", required_argument, 0, O_BACKEND},
    {"members", required_argument, 0, O_MEMBERS},
    {"key", required_argument, 0, O_KEY},
    {"key-prefix", required_argument, 0, O_KEYPREFIX},
    {"profile", required_argument, 0, O_PROFILE},
    {"vnodes", required_argument, 0, O_VNODES},
    {"spare-blocks", required_argument, 0, O_SPAREBLOCKS},
    {"balance", required_argument, 0, O_BALANCE},
    {"min-capacity", required_argument, 0, O_MINCAPACITY},
    {"backend-timeout", required_argument, 0, O_BTIMEOUT},
    {"client-timeout", required_argument, 0, O_CTIMEOUT},
    {"fail-timeout", required_argument, 0, O_FAILTIMEOUT},
    {"max-headers", required_argument, 0, O_MAXHDR},
    {"max-body", required_argument, 0, O_MAXBODY},
    {"body-min-rate", required_argument, 0, O_BODYRATE},
    {"max-idle", required_argument, 0, O_MAXIDLE},
    {"verbose", no_argument, 0, O_VERBOSE},
    {"max-conns", required_argument, 0, O_MAXCONNS},
    {"max-requests", required_argument, 0, O_MAXREQS},
    {"max-body-total", required_argument, 0, O_MAXBODYTOTAL},
    {"stats-listen", required_argument, 0, O_STATSLISTEN},
    {"stats-allow", required_argument, 0, O_STATSALLOW},
    {"slow-start", required_argument, 0, O_SLOWSTART},
    {"drain", required_argument, 0, O_DRAIN},
    {"etcd", required_argument, 0, O_ETCD},
    {"etcd-prefix", required_argument, 0, O_ETCDPREFIX},
    {"etcd-max-answer", required_argument, 0, O_ETCDMAXANSWER},
    {"etcd-max-points", required_argument, 0, O_ETCDMAXPOINTS},
    {"etcd-range-timeout", required_argument, 0, O_ETCDRANGETIMEOUT},
    {"outcome-header", no_argument, 0, O_OUTCOMEHEADER},
    {"send-min-rate", required_argument, 0, O_SENDRATE},
    {"members-max-points", required_argument, 0, O_MEMBERSMAXPOINTS},
    {"load-metrics", required_argument, 0, O_LOADMETRICS},
    {"load-interval", required_argument, 0, O_LOADINTERVAL},
    {"load-metric", required_argument, 0, O_LOADMETRIC},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* Applies one option.  Returns 0 / -1 (reported). */
static int parse_option(int c, const char *arg)
{
    size_t v;
    double d;
    const char *err;
    switch (c) {
    case O_LISTEN: {
        uint16_t port;
        if (lb_split_hostport(arg, lb_cfg.listen_host, sizeof lb_cfg.listen_host, &port) < 0)
            return bad("--listen %s: expected HOST:PORT", arg);
        lb_cfg.listen_port = port;
        return 0;
    }
    case O_THREADS:
        if (parse_size(arg, &v, 1, 256) < 0)
            return bad("--threads: 1..256");
        lb_cfg.threads = (unsigned)v;
        return 0;
    case O_BACKEND:
        if (lb_entries_put(&lb_cfg.static_entries, arg, &err) < 0)
            return bad("--backend %s: %s", arg, err);
        return 0;
    case O_MEMBERS: lb_cfg.members_file = arg; return 0;
    case O_KEY: return parse_key(arg);
    case O_KEYPREFIX:
        if (parse_size(arg, &lb_cfg.key_prefix, 1, 1u << 20) < 0)
            return bad("--key-prefix: a positive number of bytes");
        return 0;
    case O_PROFILE:
        if (chring_profile_parse(arg, &lb_cfg.profile) < 0 || !profile_usable(lb_cfg.profile))
            return bad("--profile %s: unknown or not for HOST:PORT members (one of: %s)", arg,
                       profile_list());
        return 0;
    case O_VNODES:
        if (parse_size(arg, &v, 1, CHRING_POINTS_MAX) < 0)
            return bad("--vnodes: 1..%u", CHRING_POINTS_MAX);
        lb_cfg.vnodes = (uint32_t)v;
        return 0;
    case O_SPAREBLOCKS:
        if (arg[0] == '\0' || parse_size(arg, &v, 0, 6) < 0)
            return bad("--spare-blocks: 0..6");
        lb_cfg.spare_blocks = (unsigned)v;
        return 0;
    case O_BALANCE: {
        char *end;
        lb_cfg.balance = strtod(arg, &end);
        if (*end || !isfinite(lb_cfg.balance) || lb_cfg.balance < 1)
            return bad("--balance: a number >= 1");
        return 0;
    }
    case O_MINCAPACITY:
        if (parse_size(arg, &v, 0, 1000000) < 0)
            return bad("--min-capacity: 0..1000000 requests");
        lb_cfg.min_capacity = (uint32_t)v;
        return 0;
    case O_BTIMEOUT:
        if (parse_timeval(arg, &lb_cfg.backend_timeout) < 0)
            return bad("--backend-timeout: seconds, 0.001..86400");
        return 0;
    case O_CTIMEOUT:
        if (parse_timeval(arg, &lb_cfg.client_timeout) < 0)
            return bad("--client-timeout: seconds, 0.001..86400");
        return 0;
    case O_FAILTIMEOUT:
        if (parse_seconds(arg, true, &d) < 0)
            return bad("--fail-timeout: 0 or seconds, 0.001..86400");
        lb_cfg.fail_timeout_ms = (int64_t)(d * 1000);
        return 0;
    case O_MAXHDR:
        if (parse_size(arg, &lb_cfg.max_headers, 256, 1u << 20) < 0)
            return bad("--max-headers: 256..1048576");
        return 0;
    case O_MAXBODY:
        if (parse_size(arg, &lb_cfg.max_body, 0, (size_t)1 << 31) < 0)
            return bad("--max-body: 0..2147483648");
        return 0;
    case O_BODYRATE:
        if (parse_size(arg, &v, 0, (size_t)1 << 40) < 0)
            return bad("--body-min-rate: 0..1099511627776");
        lb_cfg.body_min_rate = v;
        return 0;
    case O_SENDRATE:
        if (parse_size(arg, &v, 0, (size_t)1 << 40) < 0)
            return bad("--send-min-rate: 0..1099511627776");
        lb_cfg.send_min_rate = v;
        return 0;
    case O_MAXIDLE:
        if (parse_size(arg, &v, 0, 100000) < 0)
            return bad("--max-idle: 0..100000");
        lb_cfg.max_idle = (unsigned)v;
        return 0;
    case O_VERBOSE: lb_cfg.verbose = true; return 0;
    case O_MAXCONNS:
        if (parse_size(arg, &v, 1, 1000000) < 0)
            return bad("--max-conns: 1..1000000");
        lb_cfg.max_conns = (unsigned)v;
        return 0;
    case O_MAXREQS:
        if (parse_size(arg, &v, 1, 1000000) < 0)
            return bad("--max-requests: 1..1000000");
        lb_cfg.max_requests = (unsigned)v;
        return 0;
    case O_MAXBODYTOTAL:
        if (parse_size(arg, &v, 0, (size_t)1 << 40) < 0)
            return bad("--max-body-total: 0..1099511627776");
        lb_cfg.max_body_total = v;
        return 0;
    case O_STATSLISTEN:
        if (lb_split_hostport(arg, lb_cfg.stats_host, sizeof lb_cfg.stats_host,
                              &lb_cfg.stats_port) < 0 ||
            lb_cfg.stats_port == 0)
            return bad("--stats-listen %s: expected HOST:PORT", arg);
        return 0;
    case O_STATSALLOW: lb_cfg.stats_allow = arg; return lb_stats_allow_parse(arg);
    case O_SLOWSTART:
        if (parse_seconds(arg, true, &d) < 0)
            return bad("--slow-start: 0 or seconds, 0.001..86400");
        lb_cfg.slow_start_ms = (uint32_t)(d * 1000);
        return 0;
    case O_DRAIN:
        if (parse_seconds(arg, true, &d) < 0)
            return bad("--drain: 0 or seconds, 0.001..86400");
        lb_cfg.drain_ms = (uint32_t)(d * 1000);
        return 0;
    case O_ETCD: {
        char host[256];
        uint16_t port;
        if (strncmp(arg, "http://", 7) != 0 ||
            lb_split_hostport(arg + 7, host, sizeof host, &port) < 0)
            return bad("--etcd %s: expected http://HOST:PORT", arg);
        lb_cfg.etcd_url = arg;
        return 0;
    }
    case O_ETCDPREFIX:
        if (!arg[0] || strlen(arg) > 200)
            return bad("--etcd-prefix: 1..200 bytes");
        lb_cfg.etcd_prefix = arg;
        return 0;
    case O_ETCDMAXANSWER:
        if (parse_size(arg, &lb_cfg.etcd_max_answer, 4096, (size_t)1 << 32) < 0)
            return bad("--etcd-max-answer: 4096..4294967296 bytes");
        return 0;
    case O_MEMBERSMAXPOINTS:
        if (parse_size(arg, &v, 1, CHRING_RING_POINTS_MAX) < 0)
            return bad("--members-max-points: 1..%u", CHRING_RING_POINTS_MAX);
        lb_cfg.members_max_points = v;
        return 0;
    case O_ETCDMAXPOINTS:
        if (parse_size(arg, &v, 1, CHRING_RING_POINTS_MAX) < 0)
            return bad("--etcd-max-points: 1..%u", CHRING_RING_POINTS_MAX);
        lb_cfg.etcd_max_points = v;
        return 0;
    case O_ETCDRANGETIMEOUT:
        if (parse_seconds(arg, false, &d) < 0)
            return bad("--etcd-range-timeout: seconds, 0.001..86400");
        lb_cfg.etcd_range_timeout_ms = (uint32_t)(d * 1000);
        return 0;
    case O_OUTCOMEHEADER: lb_cfg.outcome_header = true; return 0;
    case O_LOADMETRICS:
        if (arg[0] != '/' || strlen(arg) > 1000)
            return bad("--load-metrics: a path beginning with '/', at most 1000 bytes");
        for (const char *c = arg; *c; c++)
            if ((unsigned char)*c <= ' ' || *c == 0x7f)
                return bad("--load-metrics: no blank or control byte");
        lb_cfg.load_path = arg;
        return 0;
    case O_LOADINTERVAL:
        if (parse_seconds(arg, false, &d) < 0)
            return bad("--load-interval: seconds, 0.001..86400");
        lb_cfg.load_interval = d;
        return 0;
    case O_LOADMETRIC:
        if (!arg[0] || strlen(arg) > 1000)
            return bad("--load-metric: 1..1000 bytes of comma-separated names");
        lb_cfg.load_metric = arg;
        return 0;
    case O_HELP: usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
}

int lb_config_parse(int argc, char **argv)
{
    set_defaults();
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
        if (parse_option(c, optarg) < 0)
            return -1;
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (!lb_cfg.stats_allow && lb_stats_allow_parse(NULL) < 0)
        return -1;
    if (lb_cfg.key_kind == KEY_PROMPT && lb_cfg.key_prefix == 0)
        lb_cfg.key_prefix = LB_PROMPT_DEFAULT_PREFIX;
    if (lb_cfg.static_entries.n == 0 && !lb_cfg.members_file && !lb_cfg.etcd_url) {
        bad("no backends: give --backend, --members or --etcd");
        usage(stderr);
        return -1;
    }
    return 0;
}
