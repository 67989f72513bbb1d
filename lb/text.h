/* chring-lb: bytes from outside (etcd keys and values, member names) made safe to show.
 *
 * SPDX-License-Identifier: MIT
 *
 * Two writers, both pure functions of their input (no allocation, any thread):
 *   lb_text_quote  for a log line: printable ASCII as is, every other byte (control bytes,
 *                  terminal escapes, newlines, any byte >= 0x80) and the backslash as \xNN, so a
 *                  quoted value can neither forge a log line nor drive a terminal.
 *   lb_text_json   for a JSON string: valid UTF-8 kept, invalid UTF-8 replaced by U+FFFD (the
 *                  output is always valid JSON), control characters and the invisible or
 *                  direction-changing characters (bidi controls such as U+202E, zero-width
 *                  characters, U+FEFF) written as \uXXXX escapes.
 */
#ifndef CHRING_LB_TEXT_H
#define CHRING_LB_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Writes s[0..n) quoted for a log line into out (cap >= 8 bytes, NUL-terminated); when it does
 * not fit, the output ends in "..." (truncated).  Returns the length written. */
size_t lb_text_quote(char *out, size_t cap, const void *s, size_t n);

/* The length lb_text_json writes for s[0..n), quotes included. */
size_t lb_text_json_len(const void *s, size_t n);
/* Writes s[0..n) as a JSON string, with its quotes, into out (cap >= lb_text_json_len + 1;
 * NUL-terminated).  Returns the length written. */
size_t lb_text_json(char *out, size_t cap, const void *s, size_t n);

/* True for a code point the status page must show as an escape rather than as itself: C0 and
 * C1 controls, DEL, bidi controls, zero-width and other invisible format characters. */
bool lb_text_invisible(unsigned cp);

#endif
