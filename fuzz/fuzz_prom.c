/* libFuzzer target: chring-lb's Prometheus text reader (lb/prom_read.c), fed an engine's
 * /metrics answer as the load scraper would be.
 *
 * Checks beyond "no crash, no leak, no undefined behaviour" (it allocates nothing): every sample
 * handed over lies inside the text, its name is a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), its
 * label text lies inside the line; lb_prom_sum counts no more samples than lb_prom_parse sees,
 * fails exactly when it fails, and its sum is finite and not negative; every label of every
 * sample unescapes into a buffer no longer than its escaped text.
 *
 * SPDX-License-Identifier: MIT
 */
#include "prom_read.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) \
    do { \
        if (!(x)) \
            abort(); \
    } while (0)

struct ctx {
    const char *text;
    size_t len;
};

static int name_char(unsigned char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

static int check_sample(const struct lb_prom_sample *s, void *arg)
{
    const struct ctx *c = arg;
    CHECK(s->name >= c->text && s->name + s->name_len <= c->text + c->len && s->name_len > 0);
    for (size_t i = 0; i < s->name_len; i++)
        CHECK(name_char((unsigned char)s->name[i], i == 0));
    if (s->labels != NULL) {
        CHECK(s->labels >= c->text && s->labels + s->labels_len <= c->text + c->len);
        CHECK(memchr(s->labels, '\n', s->labels_len) == NULL);
        static const char *const keys[] = {"model_name", "a", "le", ""};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char out[512];
            long n = lb_prom_label(s->labels, s->labels_len, keys[k], out, sizeof out);
            CHECK(n >= -2 && (n < 0 || (size_t)n <= s->labels_len));
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct ctx c = {text, size};
    const char *why, *why2;
    size_t line, line2;
    long n = lb_prom_parse(text, size, check_sample, &c, &why, &line);
    CHECK(n >= -1);
    CHECK((n < 0) == (why != NULL));
    const char *names[] = {"vllm:num_requests_running", "vllm:num_requests_waiting", "x"};
    double sum;
    size_t skipped;
    long counted = lb_prom_sum(text, size, names, 3, &sum, &skipped, &why2, &line2);
    CHECK((counted < 0) == (n < 0));
    if (n >= 0) {
        CHECK(counted + (long)skipped <= n);
        CHECK(isfinite(sum) || counted > 0); /* a sum of finite values may overflow to inf */
        CHECK(!(sum < 0));
    } else {
        CHECK(line2 == line && line >= 1);
    }
    return 0;
}
