/* chring-lb: the options (config.c): lb_cfg and its parsing.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_CONFIG_H
#define CHRING_LB_CONFIG_H

#include "members.h"

#include <chring.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

enum key_kind {
    KEY_PATH,
    KEY_HEADER,
    KEY_QUERY,
    KEY_PROMPT /* the model and the prompt of an OpenAI-compatible JSON body (prompt.h) */
};

/* --key prompt without --key-prefix keeps this many bytes of the key (the model, a NUL byte and
 * the prompt's first block): docs/llm.md says how it was chosen. */
#define LB_PROMPT_DEFAULT_PREFIX 1024

struct lb_config {
    char listen_host[256];
    uint16_t listen_port;
    unsigned threads;
    enum key_kind key_kind;
    const char *key_name; /* header or query argument name */
    size_t key_prefix;    /* 0: whole key (--key prompt: LB_PROMPT_DEFAULT_PREFIX) */
    chring_profile_t profile;
    uint32_t vnodes;
    double balance;
    uint32_t min_capacity; /* --min-capacity: the floor under the bound (config.min_capacity) */
    unsigned spare_blocks; /* --spare-blocks: chring_set_spares_at_rest (docs/lb.md, memory) */
    struct timeval backend_timeout;
    struct timeval client_timeout;
    size_t max_headers;
    size_t max_body;
    uint64_t body_min_rate;  /* request body bytes per second a client must keep up */
    uint64_t members_max_points; /* --backend plus --members: points in all (membership.c) */
    uint64_t send_min_rate;  /* answer bytes per second a client that keeps one waiting must take */
    unsigned max_idle;       /* idle backend connections kept per backend per worker */
    size_t high_water;       /* client output bytes above which backend reads pause */
    int64_t fail_timeout_ms; /* after a failure, send the backend's keys to the next replica */
    const char *members_file;
    lb_entries_t static_entries; /* from --backend */
    bool verbose;
    bool outcome_header; /* --outcome-header: X-Chring-Outcome on proxied answers */
    /* limits (limits.c) and the stats listener (status.c) */
    unsigned max_conns;      /* client connections in all; at the limit accept pauses */
    unsigned max_requests;   /* requests in flight in all; above: 503 */
    uint64_t max_body_total; /* request body bytes buffered in all; above: 503 */
    char stats_host[256];    /* --stats-listen; stats_port 0: stats on the main listener */
    uint16_t stats_port;
    const char *stats_allow; /* --stats-allow: "any" or a comma-separated list of CIDRs */
    /* health and membership feeds (health.c, etcd.c) */
    uint32_t slow_start_ms;  /* --slow-start: members that join later ramp up over this */
    uint32_t drain_ms;       /* --drain: a member removed ramps to 0 and leaves by then */
    /* the load the engines report (loadmetrics.c): --load-metrics PATH (NULL: off),
     * --load-interval S, --load-metric NAME[,NAME...] */
    const char *load_path;
    double load_interval;
    const char *load_metric;
    const char *etcd_url;    /* --etcd http://HOST:PORT, or NULL */
    const char *etcd_prefix; /* --etcd-prefix, default "/chring/pool/" */
    /* the etcd feed's bounds (etcd.c) */
    size_t etcd_max_answer;         /* --etcd-max-answer: a range answer or one watch message */
    uint64_t etcd_max_points;       /* --etcd-max-points: etcd's members' points in all */
    uint32_t etcd_range_timeout_ms; /* --etcd-range-timeout: a whole range answer */
};

/* Set once by lb_config_parse before any thread starts; read-only afterwards. */
extern struct lb_config lb_cfg;

/* Fills lb_cfg from the command line.  Returns 0, or -1 after printing why on standard error;
 * --help prints the usage and exits 0. */
int lb_config_parse(int argc, char **argv);

#endif
