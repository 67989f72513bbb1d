/* chring-lb: the routing key of an LLM request (--key prompt): the model and the prompt's
 * canonical text, read from an OpenAI-compatible JSON body (prompt.c, docs/lb.md "Routing by the
 * prompt").  Pure code on bytes: no libevent, no global state; the fuzz target
 * (fuzz/fuzz_prompt.c) and the unit tests (tests/lb/test_prompt.c) build it alone.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_PROMPT_H
#define CHRING_LB_PROMPT_H

#include <stddef.h>

/* The bounds a body must keep to be parsed (else it routes by the empty key, forwarded as it
 * is: the engine answers it).  Counted by a scan of the body before libjansson builds its tree,
 * so that a hostile body costs time linear in its size and memory within a small factor of it:
 * values (strings, numbers, literals, objects, arrays) in all, and nesting depth. */
#define LB_PROMPT_MAX_VALUES (1u << 18)
#define LB_PROMPT_MAX_DEPTH 64

/* What lb_prompt_key found, for the stats and the tests. */
enum lb_prompt_kind {
    LB_PROMPT_NONE = 0,  /* not a JSON object within the bounds: the empty key */
    LB_PROMPT_OBJECT,    /* an object with neither "messages" nor "prompt": the model's empty prompt */
    LB_PROMPT_TEXT,      /* "prompt" */
    LB_PROMPT_MESSAGES,  /* "messages" (chat) */
    LB_PROMPT_TOO_LARGE, /* over LB_PROMPT_MAX_VALUES or LB_PROMPT_MAX_DEPTH: the empty key */
};

/* Writes the key of the JSON body body[0..len) into out[0..cap) and returns its length (at
 * most cap; the key is cut there, which is how --key-prefix keeps the first block): the "model"
 * string, one NUL byte, then the prompt's canonical text:
 *   "messages" (an array): for each message in order, its "role", "\n", its "content" (a
 *       string, or the concatenated "text" of its parts whose "type" is "text") and "\n";
 *   else "prompt": a string, that string; an array, its first element: a string, that string;
 *       token ids (an array of integers, or the array itself when its first element is an
 *       integer), each id in decimal followed by one space.
 * Fields of the wrong type count as absent (an absent model is the empty model).  A body that
 * is not a JSON object (or breaks the bounds above, or is not valid UTF-8) gives the empty key
 * (0).  *kind (may be NULL) says which case it was.  Time linear in len; memory within a small
 * factor of len, freed before returning.  Thread-safe (no shared state). */
size_t lb_prompt_key(const char *body, size_t len, char *out, size_t cap, enum lb_prompt_kind *kind);

#endif
