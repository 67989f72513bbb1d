/* chring-lb: reading an engine's Prometheus text (exposition format 0.0.4) into the load it
 * reports (docs/lb.md, "Load the engines report").
 *
 * SPDX-License-Identifier: MIT
 *
 * Pure functions of the bytes the engine sent: no I/O, no allocation, no global state; any
 * thread.  A sample line is NAME[{LABEL="VALUE",...}] VALUE [TIMESTAMP]; comment lines (# HELP,
 * # TYPE, any other #) and blank lines are skipped; label values take the escapes \\, \" and \n;
 * a value is a decimal float (exponents allowed), NaN, +Inf, -Inf or Inf; a timestamp is an
 * integer (milliseconds).  Lines end at \n (a \r before it is allowed).  Time and memory are
 * linear in the text: a caller bounds the text's length (the scraper's answer limit).
 */
#ifndef CHRING_LB_PROM_READ_H
#define CHRING_LB_PROM_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sample, as lb_prom_parse hands it over: pointers into the text (not NUL-terminated). */
struct lb_prom_sample {
    const char *name;
    size_t name_len;
    const char *labels; /* between the braces, escapes as written; NULL, 0 without braces */
    size_t labels_len;
    double value;
    bool has_timestamp;
    int64_t timestamp_ms;
};

/* Calls fn for every sample of text[0..len), in order.  Returns the number of samples, or -1 with
 * *why (static text) and *line (1-based) at the first malformed line (fn was called for the
 * samples before it).  fn returning non-zero stops the parse, which then returns the samples
 * seen so far. */
long lb_prom_parse(const char *text, size_t len,
                   int (*fn)(const struct lb_prom_sample *s, void *ctx), void *ctx,
                   const char **why, size_t *line);

/* The value of label key in a sample's label text, unescaped into out (cap bytes, NUL added).
 * Returns its length, -1 when the label is absent, -2 when out is too small. */
long lb_prom_label(const char *labels, size_t labels_len, const char *key, char *out, size_t cap);

/* The load an engine reports: the sum of the values of every sample whose name is one of
 * names[0..n) (any labels).  A sample that is NaN, infinite or negative is not counted (*skipped
 * counts them).  Returns the number of samples counted (0: the text names none of them, which
 * reports nothing), or -1 with *why and *line for malformed text; *sum is their sum. */
long lb_prom_sum(const char *text, size_t len, const char *const *names, size_t n, double *sum,
                 size_t *skipped, const char **why, size_t *line);

#endif
