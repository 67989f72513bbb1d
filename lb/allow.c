/* chring-lb: --stats-allow, the peers that may read /_chring/ (docs/lb.md).
 *
 * SPDX-License-Identifier: MIT
 *
 * A leaf: asked by conn.c (a --stats-listen connection is checked when accepted) and status.c
 * (a request to /_chring/); parsed by config.c.  Set before any thread starts, read-only after.
 */
#define _GNU_SOURCE
#include "allow.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct cidr {
    int family;
    unsigned char addr[16];
    unsigned bits;
};

#define MAX_CIDRS 64
static struct cidr allow[MAX_CIDRS];
static size_t nallow;
static bool allow_any;

/* One entry of --stats-allow: an address, or an address, '/' and a prefix length in plain
 * decimal (no sign, no leading zero, no white space) with no bit set past it.  Returns NULL, or
 * why it is refused (static text, or buf). */
static const char *parse_cidr(const char *s, size_t len, struct cidr *c, char *buf, size_t bufcap)
{
    char text[INET6_ADDRSTRLEN + 8];
    if (len == 0)
        return "an empty entry (two commas, or one at an end)";
    if (len >= sizeof text)
        return "not an IPv4 or IPv6 address";
    memcpy(text, s, len);
    text[len] = '\0';
    char *slash = strchr(text, '/');
    long bits = -1;
    if (slash) {
        const char *d = slash + 1;
        size_t nd = strlen(d);
        if (nd == 0 || nd > 3 || strspn(d, "0123456789") != nd || (nd > 1 && d[0] == '0'))
            return "the prefix length is not a plain decimal number";
        bits = strtol(d, NULL, 10);
        *slash = '\0';
    }
    unsigned max;
    if (inet_pton(AF_INET, text, c->addr) == 1) {
        c->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, text, c->addr) == 1) {
        c->family = AF_INET6;
        max = 128;
        if (memcmp(c->addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
            return "an IPv4-mapped IPv6 address: write the IPv4 form (peers are matched as IPv4)";
    } else {
        return "not an IPv4 or IPv6 address";
    }
    if (bits < 0)
        bits = max;
    if ((unsigned)bits > max) {
        snprintf(buf, bufcap, "the prefix length is above %u", max);
        return buf;
    }
    c->bits = (unsigned)bits;
    for (unsigned i = c->bits; i < max; i++)
        if (c->addr[i / 8] & (0x80 >> (i % 8))) {
            struct cidr net = *c;
            for (unsigned j = c->bits; j < max; j++)
                net.addr[j / 8] &= (unsigned char)~(0x80 >> (j % 8));
            char a[INET6_ADDRSTRLEN];
            inet_ntop(c->family, net.addr, a, sizeof a);
            snprintf(buf, bufcap, "bits set past /%u (the network is %s/%u)", c->bits, a, c->bits);
            return buf;
        }
    return NULL;
}

int lb_stats_allow_parse(const char *list)
{
    nallow = 0;
    allow_any = false;
    if (!list)
        list = "127.0.0.0/8,::1";
    if (strcmp(list, "any") == 0) {
        allow_any = true;
        return 0;
    }
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char buf[128], shown[64];
        const char *why;
        if (len == 3 && memcmp(p, "any", 3) == 0)
            why = "'any' must stand alone";
        else if (nallow == MAX_CIDRS)
            why = "more entries than the 64 allowed";
        else
            why = parse_cidr(p, len, &allow[nallow], buf, sizeof buf);
        if (why) {
            snprintf(shown, sizeof shown, "%.*s", (int)(len < 48 ? len : 48), p);
            for (char *c = shown; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                    *c = '?';
            fprintf(stderr,
                    "chring-lb: --stats-allow: entry %zu '%s': %s; expected 'any' or up to %d "
                    "addresses or CIDRs (a.b.c.d/n, x::y/n) separated by commas\n",
                    nallow + 1, shown, why, MAX_CIDRS);
            nallow = 0;
            return -1;
        }
        nallow++;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static bool prefix_match(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

bool lb_stats_peer_allowed(const char *peer)
{
    if (allow_any)
        return true;
    unsigned char a4[4], a6[16];
    bool v4 = inet_pton(AF_INET, peer, a4) == 1;
    bool v6 = !v4 && inet_pton(AF_INET6, peer, a6) == 1;
    if (v6 && memcmp(a6, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) { /* IPv4-mapped */
        memcpy(a4, a6 + 12, 4);
        v4 = true;
        v6 = false;
    }
    for (size_t i = 0; i < nallow; i++) {
        if (v4 && allow[i].family == AF_INET && prefix_match(a4, allow[i].addr, allow[i].bits))
            return true;
        if (v6 && allow[i].family == AF_INET6 && prefix_match(a6, allow[i].addr, allow[i].bits))
            return true;
    }
    return false;
}

bool lb_stats_allow_any(void)
{
    return allow_any;
}
