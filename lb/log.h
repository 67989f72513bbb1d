/* chring-lb: the log line (log.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_LOG_H
#define CHRING_LB_LOG_H

/* One line "HH:MM:SS.mmm chring-lb: message" on standard error.  Any thread. */
void lb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
