/* ngx_http_upstream_chring_module: chring's placement with bounded loads, health and slow start
 * as an nginx upstream balancer (docs/nginx.md).
 *
 * SPDX-License-Identifier: MIT
 *
 *     upstream backends {
 *         chring $arg_k balance=1.25 profile=nginx vnodes=160 slow_start=30s;
 *         server 10.0.0.1:80 weight=2;
 *         server 10.0.0.2:80 max_fails=3 fail_timeout=10s;
 *     }
 *
 * Where the ring lives.  nginx parses its configuration in the master process and forks the
 * workers from it.  The ring of each upstream is built while the configuration is read (so that
 * `nginx -t` refuses what the library refuses) and freed with the configuration's memory pool.
 * Each worker inherits its own copy with the fork: a ring created before fork() keeps working
 * in the child with no call from the module (include/chring.h, "fork()").  From then on a
 * worker's ring is its own: loads count that worker's requests in flight, and health changes
 * (max_fails) are seen by that worker only, as nginx's own peer state is without a `zone`.
 * Membership never changes inside a worker; a reload builds new rings in the master.
 *
 * A reload and slow start.  The master keeps a list of the rings of the configuration it runs.
 * A new configuration builds each ring in two steps: first the servers that the same upstream
 * already had (the first population of an empty ring, which never ramps), then the servers that
 * are new, which join a populated ring and so start slowly when slow_start is set.
 *
 * Requests.  peer.get places the key with chring_acquire (bounded loads over the worker's
 * requests in flight); a retry after a failed try uses chring_acquire_skip over every server
 * this request already tried.  peer.free releases the lease, then lets nginx's round robin code
 * keep the peer's fails/checked accounting; a server that reaches max_fails is set down in the
 * ring (chring_set_down) until fail_timeout has passed since its last failure, then set up again
 * for a trial request, as nginx does with its own peers.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <chring.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Upper bounds of the directive's numbers, chosen to keep a ring of ordinary size. */
#define CHRING_NGX_VNODES_MAX 65536
#define CHRING_NGX_BALANCE_MAX 1000.0
/* Tries a request has room for before it grows its lists (most requests make one). */
#define CHRING_NGX_TRIES_FIRST 4

/* One server of an upstream: the member's udata. */
typedef struct {
    ngx_http_upstream_rr_peer_t *peer; /* nginx's peer (address, fails, fail_timeout) */
    ngx_str_t name;                    /* the member name: the server as written */
    u_char *cname;                     /* the same, NUL-terminated, for chring_set_down */
    ngx_uint_t failed;                 /* 1 while set down after max_fails failures */
} ngx_http_upstream_chring_server_t;

typedef struct {
    ngx_http_complex_value_t *key;
    double balance;
    chring_profile_t profile;
    ngx_uint_t vnodes;
    ngx_msec_t slow_start;

    chring_t *ring;
    ngx_http_upstream_chring_server_t *servers;
    ngx_uint_t nservers;
    ngx_uint_t nfailed; /* servers with failed set (worker-local after the fork) */
    uint64_t digest;         /* $chring_digest of the snapshot of digest_version (worker-local) */
    uint64_t digest_version;
    ngx_uint_t digest_valid;

    ngx_str_t upstream; /* the upstream's name, for the reload list */
    ngx_cycle_t *cycle; /* the configuration this ring belongs to */
    ngx_queue_t link;   /* in rings_of_master */
} ngx_http_upstream_chring_srv_conf_t;

typedef struct {
    /* First: nginx's SSL session callbacks take this pointer as round robin data. */
    ngx_http_upstream_rr_peer_data_t rrp;
    ngx_http_upstream_chring_srv_conf_t *conf;
    ngx_str_t key;
    chring_lease_t lease;
    ngx_http_upstream_chring_server_t *current;
    const chring_member_t **tried; /* members of the tries that ended (for acquire_skip) */
    ngx_http_upstream_chring_server_t **served; /* every try, in order ($chring_member) */
    ngx_uint_t ntried;
    ngx_uint_t nserved;
    ngx_uint_t room;    /* entries of tried and of served, grown with the tries */
    ngx_pool_t *pool;   /* the request's, for growing them */
    ngx_uint_t spilled; /* the last try went elsewhere than the key's owner (lease.outcome) */
} ngx_http_upstream_chring_peer_data_t;

static char *ngx_http_upstream_chring(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static void *ngx_http_upstream_chring_create_conf(ngx_conf_t *cf);
static ngx_int_t ngx_http_upstream_chring_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_upstream_init_chring(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_upstream_init_chring_peer(ngx_http_request_t *r,
                                                    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_upstream_get_chring_peer(ngx_peer_connection_t *pc, void *data);
static ngx_int_t ngx_http_upstream_chring_grow(ngx_http_upstream_chring_peer_data_t *hp,
                                               ngx_uint_t want);
static void ngx_http_upstream_free_chring_peer(ngx_peer_connection_t *pc, void *data,
                                               ngx_uint_t state);
static ngx_int_t ngx_http_upstream_chring_member_variable(ngx_http_request_t *r,
                                                          ngx_http_variable_value_t *v,
                                                          uintptr_t data);
static ngx_int_t ngx_http_upstream_chring_spilled_variable(ngx_http_request_t *r,
                                                           ngx_http_variable_value_t *v,
                                                           uintptr_t data);
static ngx_int_t ngx_http_upstream_chring_digest_variable(ngx_http_request_t *r,
                                                          ngx_http_variable_value_t *v,
                                                          uintptr_t data);

static ngx_command_t ngx_http_upstream_chring_commands[] = {
    {ngx_string("chring"), NGX_HTTP_UPS_CONF | NGX_CONF_1MORE, ngx_http_upstream_chring,
     NGX_HTTP_SRV_CONF_OFFSET, 0, NULL},
    ngx_null_command};

static ngx_http_module_t ngx_http_upstream_chring_module_ctx = {
    ngx_http_upstream_chring_add_variables, /* preconfiguration */
    NULL,                                   /* postconfiguration */
    NULL,                                   /* create main configuration */
    NULL,                                   /* init main configuration */
    ngx_http_upstream_chring_create_conf,   /* create server configuration */
    NULL,                                   /* merge server configuration */
    NULL,                                   /* create location configuration */
    NULL                                    /* merge location configuration */
};

ngx_module_t ngx_http_upstream_chring_module = {NGX_MODULE_V1,
                                                &ngx_http_upstream_chring_module_ctx,
                                                ngx_http_upstream_chring_commands,
                                                NGX_HTTP_MODULE,
                                                NULL, /* init master */
                                                NULL, /* init module */
                                                NULL, /* init process */
                                                NULL, /* init thread */
                                                NULL, /* exit thread */
                                                NULL, /* exit process */
                                                NULL, /* exit master */
                                                NGX_MODULE_V1_PADDING};

static ngx_http_variable_t ngx_http_upstream_chring_vars[] = {
    {ngx_string("chring_member"), NULL, ngx_http_upstream_chring_member_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("chring_spilled"), NULL, ngx_http_upstream_chring_spilled_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("chring_digest"), NULL, ngx_http_upstream_chring_digest_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    ngx_http_null_variable};

/* The rings of the configurations alive in this process, so that a new configuration finds the
 * servers its upstream had before (see "A reload and slow start" above).  Entries live in their
 * configuration's pool and leave the list with it. */
static ngx_queue_t rings_of_master;
static ngx_uint_t rings_of_master_ready;

static void *ngx_http_upstream_chring_create_conf(ngx_conf_t *cf)
{
    ngx_http_upstream_chring_srv_conf_t *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_upstream_chring_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }
    /* key NULL: the directive was not given in this upstream. */
    conf->balance = CHRING_DEFAULT_BALANCE;
    conf->profile = CHRING_PROFILE_HASH64;
    conf->vnodes = CHRING_DEFAULT_VNODES;
    conf->slow_start = 0;
    return conf;
}

/* Parses the number after "balance=": a plain decimal number in [1, CHRING_NGX_BALANCE_MAX]. */
static ngx_int_t ngx_http_upstream_chring_parse_balance(ngx_str_t *s, double *out)
{
    u_char buf[32];
    char *end;
    double c;
    size_t i;

    if (s->len == 0 || s->len >= sizeof(buf)) {
        return NGX_ERROR;
    }
    for (i = 0; i < s->len; i++) {
        if (!((s->data[i] >= '0' && s->data[i] <= '9') || s->data[i] == '.')) {
            return NGX_ERROR;
        }
    }
    ngx_memcpy(buf, s->data, s->len);
    buf[s->len] = '\0';
    errno = 0;
    c = strtod((char *)buf, &end);
    if (errno != 0 || end != (char *)buf + s->len || !isfinite(c) || c < 1.0 ||
        c > CHRING_NGX_BALANCE_MAX) {
        return NGX_ERROR;
    }
    *out = c;
    return NGX_OK;
}

/* "hash64, murmur32, ...": every profile of the library's table (chring_profile_info) but
 * custom, for the error message, so that a new profile shows without an edit here. */
static const char *
ngx_http_upstream_chring_profiles(void)
{
    static char            buf[512];
    size_t                 n = 0;
    int                    p, w;
    chring_profile_info_t  info;

    buf[0] = '\0';
    for (p = 0; p < CHRING_PROFILE_COUNT; p++) {
        if (p == CHRING_PROFILE_CUSTOM
            || chring_profile_info((chring_profile_t) p, &info) != 0)
        {
            continue;
        }
        w = snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? ", " : "", info.name);
        if (w < 0 || (size_t) w >= sizeof(buf) - n) {
            break;
        }
        n += (size_t) w;
    }
    return buf;
}


static char *ngx_http_upstream_chring(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_chring_srv_conf_t *hcf = conf;
    ngx_http_upstream_srv_conf_t *uscf;
    ngx_http_compile_complex_value_t ccv;
    ngx_str_t *value, s;
    ngx_uint_t i;
    ngx_int_t n;
    u_char name[32];

    (void)cmd;
    if (hcf->key != NULL) {
        return "is duplicate";
    }
    value = cf->args->elts;

    hcf->key = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (hcf->key == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = hcf->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "balance=", 8) == 0) {
            s.data = value[i].data + 8;
            s.len = value[i].len - 8;
            if (ngx_http_upstream_chring_parse_balance(&s, &hcf->balance) != NGX_OK) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "chring: invalid balance \"%V\": a number from 1 to %d "
                                   "(the bounded-load factor c)",
                                   &s, (int)CHRING_NGX_BALANCE_MAX);
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (ngx_strncmp(value[i].data, "profile=", 8) == 0) {
            s.data = value[i].data + 8;
            s.len = value[i].len - 8;
            if (s.len == 0 || s.len >= sizeof(name)) {
                goto bad_profile;
            }
            ngx_memcpy(name, s.data, s.len);
            name[s.len] = '\0';
            if (chring_profile_parse((const char *)name, &hcf->profile) != 0 ||
                hcf->profile == CHRING_PROFILE_CUSTOM) {
                goto bad_profile;
            }
            continue;
        bad_profile:
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "chring: unknown profile \"%V\" (%s)", &s,
                               ngx_http_upstream_chring_profiles());
            return NGX_CONF_ERROR;
        }
        if (ngx_strncmp(value[i].data, "vnodes=", 7) == 0) {
            n = ngx_atoi(value[i].data + 7, value[i].len - 7);
            if (n == NGX_ERROR || n < 1 || n > CHRING_NGX_VNODES_MAX) {
                s.data = value[i].data + 7;
                s.len = value[i].len - 7;
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "chring: invalid vnodes \"%V\": an integer from 1 to %d", &s,
                                   CHRING_NGX_VNODES_MAX);
                return NGX_CONF_ERROR;
            }
            hcf->vnodes = (ngx_uint_t)n;
            continue;
        }
        if (ngx_strncmp(value[i].data, "slow_start=", 11) == 0) {
            s.data = value[i].data + 11;
            s.len = value[i].len - 11;
            n = ngx_parse_time(&s, 0);
            if (s.len == 0 || n == NGX_ERROR || (uint64_t)n > UINT32_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "chring: invalid slow_start \"%V\": a time such as 30s or "
                                   "500ms (0 turns it off)",
                                   &s);
                return NGX_CONF_ERROR;
            }
            hcf->slow_start = (ngx_msec_t)n;
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "chring: invalid parameter \"%V\" (balance=, profile=, vnodes=, "
                           "slow_start=)",
                           &value[i]);
        return NGX_CONF_ERROR;
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "load balancing method redefined");
    }
    /* No backup (a ring has no second tier) and no max_conns (bounded loads cap the load). */
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE | NGX_HTTP_UPSTREAM_WEIGHT |
                  NGX_HTTP_UPSTREAM_MAX_FAILS | NGX_HTTP_UPSTREAM_FAIL_TIMEOUT |
                  NGX_HTTP_UPSTREAM_DOWN;
    uscf->peer.init_upstream = ngx_http_upstream_init_chring;
    return NGX_CONF_OK;
}

static void ngx_http_upstream_chring_cleanup(void *data)
{
    ngx_http_upstream_chring_srv_conf_t *hcf = data;

    ngx_queue_remove(&hcf->link);
    /* A worker that exits fast (SIGTERM) may still have requests with leases; the process ends
     * anyway, and chring_free wants every lease released first. */
    if (hcf->ring != NULL && chring_leases(hcf->ring) == 0) {
        chring_free(&hcf->ring);
    }
}

/* The ring this upstream had in a configuration this process still runs (a reload in the
 * master), or NULL. */
static chring_t *ngx_http_upstream_chring_previous(ngx_http_upstream_chring_srv_conf_t *hcf)
{
    ngx_queue_t *q;
    ngx_http_upstream_chring_srv_conf_t *old;

    if (!rings_of_master_ready) {
        return NULL;
    }
    for (q = ngx_queue_head(&rings_of_master); q != ngx_queue_sentinel(&rings_of_master);
         q = ngx_queue_next(q)) {
        old = ngx_queue_data(q, ngx_http_upstream_chring_srv_conf_t, link);
        if (old->cycle != hcf->cycle && old->ring != NULL &&
            old->upstream.len == hcf->upstream.len &&
            ngx_strncmp(old->upstream.data, hcf->upstream.data, hcf->upstream.len) == 0) {
            return old->ring;
        }
    }
    return NULL;
}

static ngx_int_t ngx_http_upstream_init_chring(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_upstream_chring_srv_conf_t *hcf;
    ngx_http_upstream_rr_peers_t *peers;
    ngx_http_upstream_rr_peer_t *peer;
    ngx_http_upstream_server_t *server;
    ngx_http_upstream_chring_server_t *srv;
    ngx_pool_cleanup_t *cln;
    chring_config_t cfg;
    chring_change_t *changes;
    chring_t *previous;
    const chring_snap_t *psnap;
    ngx_uint_t i, j, n, nold, nnew;
    int rc;

    hcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_chring_module);

    if (us->servers != NULL) {
        server = us->servers->elts;
        for (i = 0; i < us->servers->nelts; i++) {
            if (server[i].backup) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "chring: server \"%V\" is a backup server in upstream \"%V\" in "
                              "%s:%ui: chring has no backup servers (the ring's next members "
                              "take a server's keys)",
                              &server[i].name, &us->host, us->file_name, us->line);
                return NGX_ERROR;
            }
            if (server[i].max_conns) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "chring: server \"%V\" has max_conns in upstream \"%V\" in %s:%ui: "
                              "chring bounds each server's load itself (balance=)",
                              &server[i].name, &us->host, us->file_name, us->line);
                return NGX_ERROR;
            }
        }
    }
    if (us->shm_zone != NULL) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "chring: upstream \"%V\" in %s:%ui has a zone: chring keeps its state per "
                      "worker process and does not use one",
                      &us->host, us->file_name, us->line);
        return NGX_ERROR;
    }

    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }
    us->peer.init = ngx_http_upstream_init_chring_peer;
    peers = us->peer.data;

    n = peers->number;
    if (n == 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "chring: no servers in upstream \"%V\" in %s:%ui",
                      &us->host, us->file_name, us->line);
        return NGX_ERROR;
    }
    hcf->servers = ngx_pcalloc(cf->pool, n * sizeof(ngx_http_upstream_chring_server_t));
    changes = ngx_pcalloc(cf->temp_pool, n * sizeof(chring_change_t));
    if (hcf->servers == NULL || changes == NULL) {
        return NGX_ERROR;
    }
    for (peer = peers->peer, i = 0; peer != NULL && i < n; peer = peer->next, i++) {
        srv = &hcf->servers[i];
        srv->peer = peer;
        srv->name = peer->server;
        if (srv->name.len == 0 || srv->name.len > CHRING_NAME_MAX) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "chring: server \"%V\" in upstream \"%V\" in %s:%ui: a member name is "
                          "1 to %d bytes",
                          &srv->name, &us->host, us->file_name, us->line, CHRING_NAME_MAX);
            return NGX_ERROR;
        }
        srv->cname = ngx_pnalloc(cf->pool, srv->name.len + 1);
        if (srv->cname == NULL) {
            return NGX_ERROR;
        }
        ngx_memcpy(srv->cname, srv->name.data, srv->name.len);
        srv->cname[srv->name.len] = '\0';
        for (j = 0; j < i; j++) {
            if (hcf->servers[j].name.len == srv->name.len &&
                ngx_strncmp(hcf->servers[j].name.data, srv->name.data, srv->name.len) == 0) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "chring: server \"%V\" appears more than once in upstream \"%V\" in "
                              "%s:%ui (a name that resolves to several addresses counts once per "
                              "address): chring needs one name per address, give each address "
                              "its own server line",
                              &srv->name, &us->host, us->file_name, us->line);
                return NGX_ERROR;
            }
        }
    }
    hcf->nservers = i;

    hcf->upstream = us->host;
    hcf->cycle = cf->cycle;
    if (!rings_of_master_ready) {
        ngx_queue_init(&rings_of_master);
        rings_of_master_ready = 1;
    }

    chring_config_default(&cfg);
    cfg.profile = hcf->profile;
    cfg.vnodes = (uint32_t)hcf->vnodes;
    cfg.balance = hcf->balance;
    cfg.slow_start_ms = (uint32_t)hcf->slow_start;
    rc = chring_new(&hcf->ring, &cfg);
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "chring: upstream \"%V\" in %s:%ui: chring_new: %s", &us->host, us->file_name,
                      us->line, chring_strerror(rc));
        return NGX_ERROR;
    }
    /* A configuration's ring is built once and then only read (health aside): no spare blocks
     * for a burst of publishes that never comes.  Without this its build (a snapshot of 8 MB or
     * more) would make five ready, and nginx -t and every reload would peak at six times the
     * ring (docs/nginx.md, "Memory"). */
    rc = chring_set_prefault(hcf->ring, 0);
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "chring: upstream \"%V\": chring_set_prefault: %s",
                      &us->host, chring_strerror(rc));
        chring_free(&hcf->ring);
        return NGX_ERROR;
    }
    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        chring_free(&hcf->ring);
        return NGX_ERROR;
    }
    cln->handler = ngx_http_upstream_chring_cleanup;
    cln->data = hcf;
    ngx_queue_insert_tail(&rings_of_master, &hcf->link);

    /* Servers the upstream had before first (no ramp), then the new ones (slow start). */
    previous = ngx_http_upstream_chring_previous(hcf);
    psnap = previous != NULL ? chring_snap_enter(previous) : NULL;
    nold = 0;
    nnew = n;
    for (i = 0; i < n; i++) {
        srv = &hcf->servers[i];
        if (psnap != NULL && chring_snap_find(psnap, (const char *)srv->cname) != NULL) {
            changes[nold].name = (const char *)srv->cname;
            changes[nold].weight = (uint32_t)srv->peer->weight;
            changes[nold].udata = srv;
            nold++;
        } else {
            nnew--;
            changes[nnew].name = (const char *)srv->cname;
            changes[nnew].weight = (uint32_t)srv->peer->weight;
            changes[nnew].udata = srv;
        }
    }
    if (psnap != NULL) {
        chring_snap_exit(previous, psnap);
    }
    rc = chring_update(hcf->ring, changes, nold);
    if (rc == 0) {
        rc = chring_update(hcf->ring, changes + nold, n - nold);
    }
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "chring: upstream \"%V\" in %s:%ui: its servers cannot be members of a "
                      "%s ring: %s",
                      &us->host, us->file_name, us->line, chring_profile_name(hcf->profile),
                      chring_strerror(rc));
        return NGX_ERROR;
    }
    for (i = 0; i < n; i++) {
        if (hcf->servers[i].peer->down) {
            rc = chring_set_down(hcf->ring, (const char *)hcf->servers[i].cname, 1);
            if (rc != 0) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "chring: set_down \"%V\": %s",
                              &hcf->servers[i].name, chring_strerror(rc));
                return NGX_ERROR;
            }
        }
    }
    /* Spare blocks the build left (none are made ready: chring_set_prefault above; the empty
     * snapshot's block, or a replaced one on its way back) would only cost memory: give them back
     * now.  The ring's trimmer would free them 200 ms later, but not in the processes forked
     * before then (nginx's daemon and its workers, which have no trimmer thread), which would
     * keep them for as long as the configuration runs (docs/nginx.md, "Memory"). */
    rc = chring_trim(hcf->ring);
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "chring: upstream \"%V\": chring_trim: %s",
                      &us->host, chring_strerror(rc));
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* Makes tried and served hold at least want entries (at most the upstream's servers): twice
 * the room, in the request's pool, the entries so far copied.  NGX_OK or NGX_ERROR (no memory;
 * nothing changed). */
static ngx_int_t ngx_http_upstream_chring_grow(ngx_http_upstream_chring_peer_data_t *hp,
                                               ngx_uint_t want)
{
    const chring_member_t **tried;
    ngx_http_upstream_chring_server_t **served;
    ngx_uint_t room;

    if (want <= hp->room) {
        return NGX_OK;
    }
    room = ngx_max(want, 2 * hp->room);
    tried = ngx_palloc(hp->pool, room * sizeof(*tried));
    served = ngx_palloc(hp->pool, room * sizeof(*served));
    if (tried == NULL || served == NULL) {
        return NGX_ERROR;
    }
    if (hp->ntried > 0) {
        ngx_memcpy(tried, hp->tried, hp->ntried * sizeof(*tried));
    }
    if (hp->nserved > 0) {
        ngx_memcpy(served, hp->served, hp->nserved * sizeof(*served));
    }
    hp->tried = tried;
    hp->served = served;
    hp->room = room;
    return NGX_OK;
}

static ngx_int_t ngx_http_upstream_init_chring_peer(ngx_http_request_t *r,
                                                    ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_upstream_chring_srv_conf_t *hcf;
    ngx_http_upstream_chring_peer_data_t *hp;

    hcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_chring_module);
    hp = ngx_pcalloc(r->pool, sizeof(ngx_http_upstream_chring_peer_data_t));
    if (hp == NULL) {
        return NGX_ERROR;
    }
    /* Room for a few tries; grown on a retry beyond them (a request pays for the tries it makes,
     * not for every server of the upstream: docs/nginx.md, "Memory"). */
    hp->pool = r->pool;
    if (ngx_http_upstream_chring_grow(hp, ngx_min(hcf->nservers, CHRING_NGX_TRIES_FIRST)) !=
        NGX_OK) {
        return NGX_ERROR;
    }
    r->upstream->peer.data = &hp->rrp;
    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }
    r->upstream->peer.get = ngx_http_upstream_get_chring_peer;
    r->upstream->peer.free = ngx_http_upstream_free_chring_peer;
    /* Bounded retries: each server once at most (proxy_next_upstream_tries may cap it lower). */
    r->upstream->peer.tries = hcf->nservers;

    if (ngx_http_complex_value(r, hcf->key, &hp->key) != NGX_OK) {
        return NGX_ERROR;
    }
    hp->conf = hcf;
    ngx_http_set_ctx(r, hp, ngx_http_upstream_chring_module);
    return NGX_OK;
}

/* Sets up again the servers whose fail_timeout has passed since they were set down after
 * max_fails failures: the next request that reaches one is its trial. */
static void ngx_http_upstream_chring_recover(ngx_http_upstream_chring_srv_conf_t *hcf)
{
    ngx_http_upstream_chring_server_t *srv;
    time_t now;
    ngx_uint_t i;

    now = ngx_time();
    for (i = 0; i < hcf->nservers && hcf->nfailed > 0; i++) {
        srv = &hcf->servers[i];
        if (srv->failed && now - srv->peer->checked > srv->peer->fail_timeout) {
            if (chring_set_down(hcf->ring, (const char *)srv->cname, 0) == 0) {
                srv->failed = 0;
                hcf->nfailed--;
            }
        }
    }
}

static ngx_int_t ngx_http_upstream_get_chring_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_upstream_chring_peer_data_t *hp = data;
    ngx_http_upstream_chring_srv_conf_t *hcf = hp->conf;
    ngx_http_upstream_chring_server_t *srv;
    ngx_http_upstream_rr_peer_t *peer;
    time_t now;
    int rc;

    if (hcf->nfailed > 0) {
        ngx_http_upstream_chring_recover(hcf);
    }
    pc->cached = 0;
    pc->connection = NULL;
    /* Room for this try in served and, when it ends, in tried (a try ends before the next). */
    if (hp->nserved < hcf->nservers &&
        ngx_http_upstream_chring_grow(hp, ngx_min(hcf->nservers, hp->nserved + 1)) != NGX_OK) {
        return NGX_ERROR;
    }

    if (hp->ntried == 0) {
        rc = chring_acquire(hcf->ring, hp->key.data, hp->key.len, &hp->lease);
    } else {
        rc = chring_acquire_skip(hcf->ring, hp->key.data, hp->key.len, hp->tried, hp->ntried,
                                 &hp->lease);
    }
    if (rc != 0) {
        /* Every server is down or was tried: nginx answers 502 ("no live upstreams"). */
        pc->name = hp->rrp.peers->name;
        return NGX_BUSY;
    }
    srv = chring_member_udata(hp->lease.member);
    peer = srv->peer;
    /* The acquire says how it placed the key: no second lookup. */
    hp->spilled = hp->lease.outcome != CHRING_OUTCOME_OWNER;

    hp->current = srv;
    hp->rrp.current = peer;
    if (hp->nserved < hcf->nservers) {
        hp->served[hp->nserved++] = srv;
    }
    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;
    peer->conns++;
    now = ngx_time();
    if (now - peer->checked > peer->fail_timeout) {
        peer->checked = now;
    }
    return NGX_OK;
}

static void ngx_http_upstream_free_chring_peer(ngx_peer_connection_t *pc, void *data,
                                               ngx_uint_t state)
{
    ngx_http_upstream_chring_peer_data_t *hp = data;
    ngx_http_upstream_chring_srv_conf_t *hcf = hp->conf;
    ngx_http_upstream_chring_server_t *srv = hp->current;
    ngx_http_upstream_rr_peer_t *peer;

    if (srv == NULL) {
        return;
    }
    if (hp->ntried < hcf->nservers) {
        hp->tried[hp->ntried++] = hp->lease.member;
    }
    chring_release(hcf->ring, &hp->lease);

    /* fails, accessed, checked and conns as nginx keeps them for its own balancers. */
    ngx_http_upstream_free_round_robin_peer(pc, &hp->rrp, state);

    peer = srv->peer;
    if ((state & NGX_PEER_FAILED) && !hp->rrp.peers->single && peer->max_fails &&
        peer->fails >= peer->max_fails && !srv->failed) {
        if (chring_set_down(hcf->ring, (const char *)srv->cname, 1) == 0) {
            srv->failed = 1;
            hcf->nfailed++;
        }
    }
    hp->current = NULL;
    hp->rrp.current = NULL;
}

static ngx_int_t ngx_http_upstream_chring_member_variable(ngx_http_request_t *r,
                                                          ngx_http_variable_value_t *v,
                                                          uintptr_t data)
{
    ngx_http_upstream_chring_peer_data_t *hp;
    size_t len;
    ngx_uint_t i;
    u_char *p;

    (void)data;
    hp = ngx_http_get_module_ctx(r, ngx_http_upstream_chring_module);
    if (hp == NULL || hp->nserved == 0) {
        v->not_found = 1;
        return NGX_OK;
    }
    len = 0;
    for (i = 0; i < hp->nserved; i++) {
        len += hp->served[i]->name.len + 2;
    }
    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }
    v->data = p;
    for (i = 0; i < hp->nserved; i++) {
        if (i > 0) {
            *p++ = ',';
            *p++ = ' ';
        }
        p = ngx_cpymem(p, hp->served[i]->name.data, hp->served[i]->name.len);
    }
    v->len = p - v->data;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

static ngx_int_t ngx_http_upstream_chring_spilled_variable(ngx_http_request_t *r,
                                                           ngx_http_variable_value_t *v,
                                                           uintptr_t data)
{
    ngx_http_upstream_chring_peer_data_t *hp;

    (void)data;
    hp = ngx_http_get_module_ctx(r, ngx_http_upstream_chring_module);
    if (hp == NULL || hp->nserved == 0) {
        v->not_found = 1;
        return NGX_OK;
    }
    v->data = (u_char *)(hp->spilled ? "1" : "0");
    v->len = 1;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

/* $chring_digest: the placement digest of the worker's ring for the upstream this request used
 * (chring_snap_digest, 16 hex digits): equal in every worker and every nginx whose upstream
 * places keys alike.  O(points) once per snapshot: cached with the snapshot's version. */
static ngx_int_t ngx_http_upstream_chring_digest_variable(ngx_http_request_t *r,
                                                          ngx_http_variable_value_t *v,
                                                          uintptr_t data)
{
    ngx_http_upstream_chring_peer_data_t *hp;
    ngx_http_upstream_chring_srv_conf_t *hcf;
    const chring_snap_t *snap;
    u_char *p;

    (void)data;
    hp = ngx_http_get_module_ctx(r, ngx_http_upstream_chring_module);
    if (hp == NULL || hp->conf == NULL || hp->conf->ring == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }
    hcf = hp->conf;
    snap = chring_snap_enter(hcf->ring);
    if (!hcf->digest_valid || hcf->digest_version != chring_snap_version(snap)) {
        hcf->digest = chring_snap_digest(snap);
        hcf->digest_version = chring_snap_version(snap);
        hcf->digest_valid = 1;
    }
    chring_snap_exit(hcf->ring, snap);
    p = ngx_pnalloc(r->pool, 16);
    if (p == NULL) {
        return NGX_ERROR;
    }
    ngx_sprintf(p, "%016uxL", hcf->digest);
    v->data = p;
    v->len = 16;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}

static ngx_int_t ngx_http_upstream_chring_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t *var, *v;

    for (v = ngx_http_upstream_chring_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }
        var->get_handler = v->get_handler;
        var->data = v->data;
    }
    return NGX_OK;
}
