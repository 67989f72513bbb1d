/* chring: the command-line tool (docs/design.md §7).  Options, input and output; the commands
 * themselves live in the command engine (cli.h).
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L

#include "cli.h"

#include <chring.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --help: these lines, the engine's list of commands (chring_cli_usage), then the last line. */
static const char usage_head[] =
    "usage: chring [--profile P=hash64] [--vnodes N] [--balance C] [FILE...]\n"
    "Reads commands from FILEs or stdin (-), one per line; answers each on stdout.\n";
static const char usage_options[] =
    "  --balance C  bounded-load factor of BOUNDED and ACQUIRE (default 1.25)\n"
    "Commands (any case; blank lines and # comments are ignored)         answer\n";

/* The profiles (every one of the library's table but custom and hash64, the default the usage
 * line names) and those that ignore --vnodes,
 * written from chring_profile_info: a new profile shows without an edit here. */
static void print_profiles(FILE *f)
{
    chring_profile_info_t info;
    fputs("  --profile P ", f);
    size_t col = 13; /* the lines fit 80 columns (tests/cli checks --help) */
    for (int p = 0; p < CHRING_PROFILE_COUNT; p++)
        if (p != CHRING_PROFILE_CUSTOM && p != CHRING_PROFILE_HASH64 && /* the default: above */
            chring_profile_info((chring_profile_t)p, &info) == 0) {
            if (col + 1 + strlen(info.name) > 79) {
                fputs("\n              ", f);
                col = 13;
            }
            col += (size_t)fprintf(f, " %s", info.name);
        }
    fputs("\n  --vnodes N   points per weight, 160 (", f);
    const char *sep = "";
    for (int p = 0; p < CHRING_PROFILE_COUNT; p++)
        if (p != CHRING_PROFILE_CUSTOM && chring_profile_info((chring_profile_t)p, &info) == 0 &&
            !info.uses_vnodes) {
            fprintf(f, "%s%s", sep, info.name);
            sep = " ";
        }
    fputs(" ignore it)\n", f);
}
static const char usage_tail[] =
    "Bad lines answer ERR <reason>.  Exit 0 unless input could not be read.\n";

/* Reads lines from fd and hands each to the engine, flushing stdout after every answer.
 * A line longer than CHRING_CLI_LINE_MAX is answered "ERR line too long" and skipped up to its
 * newline.  read(2) is used rather than stdio so that an interactive pipe gets its answer as soon
 * as its line is complete.  Returns 0, -1 after a read error (reported on stderr), or -2 when
 * standard output cannot be written (a reader that went away: nothing more is read). */
static int run_fd(chring_cli_t *cli, int fd, const char *label, char *buf)
{
    size_t have = 0;       /* bytes of the current line in buf */
    bool skipping = false; /* inside a line that was too long */
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "chring: %s: %s\n", label, strerror(errno));
            return -1;
        }
        if (n == 0)
            break;
        size_t i = 0;
        while (i < (size_t)n) {
            char *nl = memchr(chunk + i, '\n', (size_t)n - i);
            size_t take = nl ? (size_t)(nl - (chunk + i)) : (size_t)n - i;
            if (!skipping) {
                if (have + take > CHRING_CLI_LINE_MAX) {
                    skipping = true;
                    have = 0;
                    fputs("ERR line too long\n", stdout);
                    if (fflush(stdout) != 0 || ferror(stdout))
                        return -2;
                } else {
                    memcpy(buf + have, chunk + i, take);
                    have += take;
                }
            }
            i += take;
            if (nl) {
                i++;
                if (!skipping) {
                    chring_cli_exec(cli, buf, have, stdout);
                    if (fflush(stdout) != 0 || ferror(stdout))
                        return -2;
                }
                skipping = false;
                have = 0;
            }
        }
    }
    if (have > 0 && !skipping) { /* a last line without a newline */
        chring_cli_exec(cli, buf, have, stdout);
        if (fflush(stdout) != 0 || ferror(stdout))
            return -2;
    }
    return 0;
}

static bool parse_option_value(const char *arg, const char *name, int *i, int argc, char **argv,
                               const char **value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return false;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0')
        return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "chring: %s needs a value\n", name);
        exit(2);
    }
    *value = argv[++*i];
    return true;
}

static void bad_usage(const char *fmt, const char *what)
{
    fprintf(stderr, "chring: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\nTry 'chring --help'.\n");
    exit(2);
}

int main(int argc, char **argv)
{
    chring_cli_options_t opt = {.profile = NULL, .vnodes = 0, .balance = 0};
    const char *vnodes_text = NULL;
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value;
        if (strcmp(arg, "--") == 0) {
            first_file = i + 1;
            break;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage_head, stdout);
            print_profiles(stdout);
            fputs(usage_options, stdout);
            chring_cli_usage(stdout);
            fputs(usage_tail, stdout);
            return 0;
        }
        if (strcmp(arg, "--version") == 0) {
            printf("chring %s\n", chring_version());
            return 0;
        }
        if (parse_option_value(arg, "--profile", &i, argc, argv, &value)) {
            chring_profile_t profile;
            if (chring_profile_parse(value, &profile) != 0 || profile == CHRING_PROFILE_CUSTOM) {
                fprintf(stderr, "chring: unknown profile '%s'; hash64 (the default) or:\n", value);
                print_profiles(stderr);
                fprintf(stderr, "Try 'chring --help'.\n");
                exit(2);
            }
            opt.profile = value;
        } else if (parse_option_value(arg, "--vnodes", &i, argc, argv, &value)) {
            vnodes_text = value; /* checked below, when the profile is known */
        } else if (parse_option_value(arg, "--balance", &i, argc, argv, &value)) {
            char *end;
            errno = 0;
            double c = strtod(value, &end);
            if (errno || end == value || *end || !isfinite(c) || !(c > 0))
                bad_usage("--balance takes a positive number (below 1 acts as 1), not '%s'", value);
            opt.balance = c;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            bad_usage("unknown option '%s'", arg);
        } else {
            first_file = i;
            break;
        }
    }

    if (vnodes_text) {
        /* Profiles that fix their own point counts (the library's table: ketama, nginx, haproxy,
         * envoy) accept any value, 0 included (docs/design.md §2.1). */
        chring_profile_t profile = CHRING_PROFILE_HASH64;
        if (opt.profile)
            chring_profile_parse(opt.profile, &profile);
        chring_profile_info_t info;
        bool ignored = chring_profile_info(profile, &info) == 0 && !info.uses_vnodes;
        unsigned long long v = 0;
        const char *p = vnodes_text;
        bool digits = *p != '\0';
        for (; *p && digits; p++)
            digits = *p >= '0' && *p <= '9';
        if (digits) {
            errno = 0;
            v = strtoull(vnodes_text, NULL, 10);
            digits = errno == 0 && v <= UINT32_MAX;
        }
        if (!digits || (!ignored && (v < 1 || v > CHRING_POINTS_MAX)))
            bad_usage("--vnodes takes a whole number from 1 to 16777216, not '%s'", vnodes_text);
        opt.vnodes = (uint32_t)v; /* 0 (profiles that ignore it) means the default */
    }

    chring_cli_t *cli;
    int rc = chring_cli_new(&cli, &opt);
    if (rc < 0) {
        fprintf(stderr, "chring: cannot create the ring: %s\n", chring_strerror(rc));
        return 1;
    }
    char *buf = malloc(CHRING_CLI_LINE_MAX);
    if (!buf) {
        fprintf(stderr, "chring: out of memory\n");
        chring_cli_free(cli);
        return 1;
    }

    /* A reader that goes away (chring ... | head -1) is a write error like any other: reported,
     * exit status 1, and nothing more read; not a death by SIGPIPE, and, when SIGPIPE was
     * ignored by the parent, not endless input answered into a closed pipe. */
    signal(SIGPIPE, SIG_IGN);
    int status = 0, run = 0;
    if (first_file >= argc) {
        run = run_fd(cli, STDIN_FILENO, "standard input", buf);
        if (run < 0)
            status = 1;
    }
    for (int i = first_file; i < argc && run != -2; i++) {
        /* Like cat: an unreadable file is reported and skipped, and the exit status is 1. */
        if (strcmp(argv[i], "-") == 0) {
            run = run_fd(cli, STDIN_FILENO, "standard input", buf);
            if (run < 0)
                status = 1;
            continue;
        }
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "chring: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        run = run_fd(cli, fd, argv[i], buf);
        if (run < 0)
            status = 1;
        close(fd);
    }

    free(buf);
    chring_cli_free(cli);
    if (run == -2 || fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "chring: error writing standard output: %s\n", strerror(errno));
        status = 1;
    }
    return status;
}
