/* Golden data for chring's ketama profile, produced by libmemcached itself (weighted ketama mode).
 *
 * Built by hand, not by meson (see gen/README or docs/compat.md):
 *
 *   cc -O2 -o /tmp/ketama_libmemcached tests/compat/gen/ketama_libmemcached.c \
 *      $(pkg-config --cflags --libs libmemcached)
 *
 * Modes:
 *   map OUT KEYS host[:port][=weight] ...   key -> member name for every line of KEYS
 *   continuum OUT host[:port][=weight] ...  libmemcached's continuum: position, member name
 *   digests OUT MAXN                        digests per member for 1..MAXN equal-weight members,
 *                                           plus a few weighted memberships
 *
 * No memcached server is contacted: libmemcached builds its continuum when servers are added
 * and memcached_generate_hash() only reads it.
 *
 * Member names are written the way chring must be given them to match: libmemcached labels a
 * server on the default port 11211 by its host alone ("10.0.1.1-0", ...) and any other server
 * as "host:port" ("10.0.2.1:11212-0", ...).  The continuum mode exists to prove that claim
 * point by point. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libmemcached's private continuum entry (libmemcached/continuum.hpp, 1.0 and 1.1): the public
 * struct memcached_st exposes only a pointer to it.  The generator checks the layout it reads
 * (indices in range, values sorted) before trusting it. */
struct memcached_continuum_item_st {
    uint32_t index;
    uint32_t value;
};

#define MAX_MEMBERS 256

struct member {
    char host[256];
    unsigned port;
    uint32_t weight;
    char name[300];
};

static void die(const char *what)
{
    fprintf(stderr, "ketama_libmemcached: %s\n", what);
    exit(1);
}

/* "host[:port][=weight]" */
static void parse_member(const char *arg, struct member *m)
{
    char buf[300];
    if (strlen(arg) >= sizeof buf)
        die("member spec too long");
    strcpy(buf, arg);
    m->weight = 1;
    char *eq = strchr(buf, '=');
    if (eq) {
        *eq = '\0';
        m->weight = (uint32_t)strtoul(eq + 1, NULL, 10);
    }
    m->port = MEMCACHED_DEFAULT_PORT;
    char *colon = strrchr(buf, ':');
    if (colon) {
        *colon = '\0';
        m->port = (unsigned)strtoul(colon + 1, NULL, 10);
    }
    snprintf(m->host, sizeof m->host, "%s", buf);
    if (m->port == MEMCACHED_DEFAULT_PORT)
        snprintf(m->name, sizeof m->name, "%s", m->host);
    else
        snprintf(m->name, sizeof m->name, "%s:%u", m->host, m->port);
}

static memcached_st *make_ring(const struct member *members, int n)
{
    memcached_st *memc = memcached_create(NULL);
    if (!memc)
        die("memcached_create");
    /* KETAMA_WEIGHTED sets MD5 for keys and points and the weighted continuum. */
    if (memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS)
        die("behavior KETAMA_WEIGHTED");
    for (int i = 0; i < n; i++) {
        if (memcached_server_add_with_weight(memc, members[i].host, (in_port_t)members[i].port,
                                             members[i].weight) != MEMCACHED_SUCCESS)
            die("memcached_server_add_with_weight");
    }
    if (memcached_server_count(memc) != (uint32_t)n)
        die("server count");
    return memc;
}

static const struct memcached_continuum_item_st *continuum(memcached_st *memc, uint32_t *count,
                                                           int n)
{
    const struct memcached_continuum_item_st *items = memc->ketama.continuum;
    *count = memc->ketama.continuum_points_counter;
    for (uint32_t i = 0; i < *count; i++) {
        if (items[i].index >= (uint32_t)n)
            die("continuum layout: index out of range");
        if (i > 0 && items[i - 1].value > items[i].value)
            die("continuum layout: not sorted");
    }
    return items;
}

static void header(FILE *out, const char *what, const struct member *members, int n)
{
    fprintf(out,
            "# generator: tests/compat/gen/ketama_libmemcached.c %s (libmemcached %s, "
            "MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED)\n",
            what, LIBMEMCACHED_VERSION_STRING);
    fprintf(out, "# profile: ketama\n");
    for (int i = 0; i < n; i++)
        fprintf(out, "#member\t%s\t%u\n", members[i].name, members[i].weight);
}

static int parse_members(int argc, char **argv, struct member *members)
{
    if (argc > MAX_MEMBERS)
        die("too many members");
    for (int i = 0; i < argc; i++)
        parse_member(argv[i], &members[i]);
    return argc;
}

static void mode_map(const char *out_path, const char *keys_path, int argc, char **argv)
{
    static struct member members[MAX_MEMBERS];
    int n = parse_members(argc, argv, members);
    memcached_st *memc = make_ring(members, n);
    FILE *keys = fopen(keys_path, "r");
    FILE *out = fopen(out_path, "w");
    if (!keys || !out)
        die("open");
    header(out, "map", members, n);
    char line[1024];
    while (fgets(line, sizeof line, keys)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = '\0';
        uint32_t idx = memcached_generate_hash(memc, line, len);
        if (idx >= (uint32_t)n)
            die("generate_hash out of range");
        fprintf(out, "%s\t%s\n", line, members[idx].name);
    }
    fclose(keys);
    fclose(out);
    memcached_free(memc);
}

static void mode_continuum(const char *out_path, int argc, char **argv)
{
    static struct member members[MAX_MEMBERS];
    int n = parse_members(argc, argv, members);
    memcached_st *memc = make_ring(members, n);
    uint32_t count;
    const struct memcached_continuum_item_st *items = continuum(memc, &count, n);
    FILE *out = fopen(out_path, "w");
    if (!out)
        die("open");
    header(out, "continuum", members, n);
    for (uint32_t i = 0; i < count; i++)
        fprintf(out, "%u\t%s\n", items[i].value, members[items[i].index].name);
    fclose(out);
    memcached_free(memc);
}

/* One line per member: members, total weight, weight, digests (points / 4, counted in
 * libmemcached's continuum). */
static void digests_of(FILE *out, struct member *members, int n)
{
    memcached_st *memc = make_ring(members, n);
    uint32_t count;
    const struct memcached_continuum_item_st *items = continuum(memc, &count, n);
    static uint32_t points[MAX_MEMBERS];
    memset(points, 0, sizeof points);
    for (uint32_t i = 0; i < count; i++)
        points[items[i].index]++;
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += members[i].weight;
    /* Members of equal weight get equal counts by construction; print each weight once and
     * check that construction instead of trusting it. */
    for (int i = 0; i < n; i++) {
        if (points[i] % 4 != 0)
            die("points not a multiple of 4");
        int first = 1;
        for (int j = 0; j < i; j++) {
            if (members[j].weight == members[i].weight) {
                if (points[j] != points[i])
                    die("equal weights, different point counts");
                first = 0;
            }
        }
        if (first)
            fprintf(out, "%d\t%llu\t%u\t%u\n", n, (unsigned long long)total, members[i].weight,
                    points[i] / 4);
    }
    memcached_free(memc);
}

static void mode_digests(const char *out_path, int maxn)
{
    static struct member members[MAX_MEMBERS];
    FILE *out = fopen(out_path, "w");
    if (!out)
        die("open");
    fprintf(out,
            "# generator: tests/compat/gen/ketama_libmemcached.c digests %d (libmemcached %s, "
            "MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED)\n",
            maxn, LIBMEMCACHED_VERSION_STRING);
    fprintf(out, "# members\ttotal_weight\tweight\tdigests (one line per distinct weight, "
                 "counted in libmemcached's continuum)\n");
    for (int n = 1; n <= maxn && n <= MAX_MEMBERS; n++) {
        for (int i = 0; i < n; i++) {
            char spec[64];
            snprintf(spec, sizeof spec, "10.0.%d.%d=1", i / 250, i % 250 + 1);
            parse_member(spec, &members[i]);
        }
        digests_of(out, members, n);
    }
    /* Weighted memberships: point counts depend on the whole membership. */
    static const uint32_t weighted[][8] = {
        {1, 2, 0},   {1, 1, 1, 2, 0},          {3, 1, 1, 1, 1, 0},
        {5, 1, 0},   {1, 2, 3, 4, 5, 6, 7, 0}, {10, 1, 1, 0},
        {100, 1, 0}, {2, 2, 2, 2, 2, 2, 3, 0},
    };
    for (size_t w = 0; w < sizeof weighted / sizeof weighted[0]; w++) {
        int n = 0;
        while (n < 8 && weighted[w][n] != 0) {
            char spec[64];
            snprintf(spec, sizeof spec, "10.1.0.%d=%u", n + 1, weighted[w][n]);
            parse_member(spec, &members[n]);
            n++;
        }
        digests_of(out, members, n);
    }
    /* Random weighted memberships (fixed seed): 1 to 60 members of weight 1 to 10, sometimes
     * one heavy member of weight up to 200. */
    uint32_t seed = 20261130u;
    for (int round = 0; round < 150; round++) {
        seed = seed * 1664525u + 1013904223u;
        int n = (int)(seed >> 8) % 60 + 1;
        for (int i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            uint32_t w = (seed >> 8) % 10 + 1;
            if (i == 0 && round % 5 == 0)
                w = (seed >> 12) % 200 + 1;
            char spec[64];
            snprintf(spec, sizeof spec, "10.2.%d.%d=%u", i / 250, i % 250 + 1, w);
            parse_member(spec, &members[i]);
        }
        digests_of(out, members, n);
    }
    fclose(out);
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "map") == 0)
        mode_map(argv[2], argv[3], argc - 4, argv + 4);
    else if (argc >= 4 && strcmp(argv[1], "continuum") == 0)
        mode_continuum(argv[2], argc - 3, argv + 3);
    else if (argc == 4 && strcmp(argv[1], "digests") == 0)
        mode_digests(argv[2], atoi(argv[3]));
    else {
        fprintf(stderr,
                "usage: %s map OUT KEYS host[:port][=weight]...\n"
                "       %s continuum OUT host[:port][=weight]...\n"
                "       %s digests OUT MAXN\n",
                argv[0], argv[0], argv[0]);
        return 2;
    }
    return 0;
}
