/* Unit tests of chring-lb's prompt key (lb/prompt.c, --key prompt): the canonical text of each
 * body shape (docs/lb.md, "Routing by the prompt"), the cut at the prefix, and the bodies that
 * route by the empty key.
 *
 * SPDX-License-Identifier: MIT
 */
#include "prompt.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out[1 << 16];
static enum lb_prompt_kind kind;

static size_t key(const char *body, size_t cap)
{
    memset(out, 0x5a, sizeof out);
    return lb_prompt_key(body, strlen(body), out, cap, &kind);
}

/* The key equals want[0..wlen) (wlen given: the key holds a NUL byte). */
static void expect_key(const char *body, const char *want, size_t wlen)
{
    size_t n = key(body, sizeof out);
    cr_assert_eq(n, wlen, "key of %s: %zu bytes, want %zu", body, n, wlen);
    cr_assert(memcmp(out, want, wlen) == 0, "key of %s differs", body);
}

Test(prompt, completions_string)
{
    expect_key("{\"model\":\"llama\",\"prompt\":\"Hello there\",\"max_tokens\":5}",
               "llama\0Hello there", 17);
    cr_assert_eq(kind, LB_PROMPT_TEXT);
}

Test(prompt, completions_array_takes_its_first_element)
{
    expect_key("{\"model\":\"m\",\"prompt\":[\"first\",\"second\"]}", "m\0first", 7);
}

Test(prompt, token_ids_in_decimal_each_followed_by_a_space)
{
    expect_key("{\"model\":\"m\",\"prompt\":[1,22,-3]}", "m\0" "1 22 -3 ", 10);
    expect_key("{\"model\":\"m\",\"prompt\":[[7,8],[9]]}", "m\0" "7 8 ", 6);
}

Test(prompt, chat_messages_role_newline_content_newline)
{
    expect_key("{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
               "{\"role\":\"user\",\"content\":\"Hi\"}],\"model\":\"x\"}",
               "x\0system\nBe brief.\nuser\nHi\n", 27);
    cr_assert_eq(kind, LB_PROMPT_MESSAGES);
}

Test(prompt, multimodal_content_keeps_its_text_parts_only)
{
    expect_key("{\"model\":\"v\",\"messages\":[{\"role\":\"user\",\"content\":["
               "{\"type\":\"text\",\"text\":\"what is \"},"
               "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}},"
               "{\"type\":\"text\",\"text\":\"this?\"}]}]}",
               "v\0user\nwhat is this?\n", 21);
}

Test(prompt, messages_win_over_prompt)
{
    expect_key("{\"model\":\"m\",\"prompt\":\"p\",\"messages\":[{\"role\":\"user\",\"content\":\"c\"}]}",
               "m\0user\nc\n", 9);
}

Test(prompt, wrong_types_count_as_absent)
{
    expect_key("{\"model\":7,\"prompt\":{\"a\":1}}", "\0", 1);
    expect_key("{\"model\":\"m\",\"messages\":[3,{\"role\":1,\"content\":null}]}", "m\0\n\n", 4);
    cr_assert_eq(kind, LB_PROMPT_MESSAGES);
}

Test(prompt, an_object_without_a_prompt_is_its_models_empty_prompt)
{
    expect_key("{\"model\":\"m\",\"input\":\"embed me\"}", "m\0", 2);
    cr_assert_eq(kind, LB_PROMPT_OBJECT);
}

Test(prompt, escapes_are_decoded_and_nul_kept)
{
    expect_key("{\"model\":\"m\",\"prompt\":\"a\\u0000b\\u00e9\\n\"}", "m\0a\0b\xc3\xa9\n", 8);
}

Test(prompt, duplicate_keys_take_the_last_as_python_does)
{
    expect_key("{\"model\":\"a\",\"prompt\":\"x\",\"model\":\"b\",\"prompt\":\"y\"}", "b\0y", 3);
}

Test(prompt, the_key_is_cut_at_the_prefix)
{
    const char *b = "{\"model\":\"mm\",\"messages\":[{\"role\":\"system\",\"content\":\"0123456789\"},"
                    "{\"role\":\"user\",\"content\":\"question\"}]}";
    size_t n = key(b, 10);
    cr_assert_eq(n, 10);
    cr_assert(memcmp(out, "mm\0system\n", 10) == 0);
    cr_assert_eq(out[10], 0x5a, "a byte written past the prefix");
    cr_assert_eq(key(b, 1), 1);
    cr_assert_eq(out[0], 'm');
}

Test(prompt, bodies_that_are_not_such_objects_give_the_empty_key)
{
    const char *bodies[] = {
        "", "   ", "[{\"model\":\"m\"}]", "\"str\"", "42", "{\"model\":\"m\",", "{\"model\":\"m\"} x",
        "{\"model\":\"\xff\xfe\",\"prompt\":\"x\"}", /* invalid UTF-8: jansson refuses it */
        "not json",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        cr_assert_eq(key(bodies[i], sizeof out), 0, "body %zu", i);
        cr_assert_eq(kind, LB_PROMPT_NONE, "body %zu", i);
    }
}

Test(prompt, nesting_past_the_bound_is_not_parsed)
{
    size_t depth = LB_PROMPT_MAX_DEPTH + 1, n = 0;
    char *b = malloc(2 * depth + 64);
    cr_assert(b);
    n += (size_t)sprintf(b, "{\"model\":\"m\",\"x\":");
    for (size_t i = 0; i < depth - 1; i++)
        b[n++] = '[';
    for (size_t i = 0; i < depth - 1; i++)
        b[n++] = ']';
    b[n++] = '}';
    cr_assert_eq(lb_prompt_key(b, n, out, sizeof out, &kind), 0);
    cr_assert_eq(kind, LB_PROMPT_TOO_LARGE);
    /* one level less: parsed */
    memmove(b + 17, b + 18, n - 18);
    memmove(b + n - 3, b + n - 2, 2);
    n -= 2;
    cr_assert_eq(lb_prompt_key(b, n, out, sizeof out, &kind), 2, "%.*s", (int)n, b);
    cr_assert_eq(kind, LB_PROMPT_OBJECT);
    free(b);
}

Test(prompt, values_past_the_bound_are_not_parsed)
{
    size_t count = LB_PROMPT_MAX_VALUES + 1, n = 0;
    char *b = malloc(2 * count + 64);
    cr_assert(b);
    n += (size_t)sprintf(b, "{\"model\":\"m\",\"prompt\":[");
    for (size_t i = 0; i < count; i++) {
        b[n++] = '1';
        b[n++] = ',';
    }
    b[n - 1] = ']';
    b[n++] = '}';
    cr_assert_eq(lb_prompt_key(b, n, out, sizeof out, &kind), 0);
    cr_assert_eq(kind, LB_PROMPT_TOO_LARGE);
    free(b);
}

Test(prompt, braces_inside_strings_do_not_count)
{
    size_t count = LB_PROMPT_MAX_DEPTH * 4, n = 0;
    char *b = malloc(count + 64);
    cr_assert(b);
    n += (size_t)sprintf(b, "{\"model\":\"m\",\"prompt\":\"\\\"");
    for (size_t i = 0; i < count; i++)
        b[n++] = '[';
    n += (size_t)sprintf(b + n, "\"}");
    cr_assert_eq(lb_prompt_key(b, n, out, sizeof out, &kind), 2 + 1 + count);
    cr_assert_eq(kind, LB_PROMPT_TEXT);
    free(b);
}
