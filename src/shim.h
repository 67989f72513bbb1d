/* Atomics, RCU publication and the sanitizer shims: the only place that knows which sanitizer
 * the library is built under.
 * SPDX-License-Identifier: MIT
 *
 * Under ThreadSanitizer the RCU publish and dereference become C11 release/acquire atomics that
 * TSan understands, and the grace period is modelled by releasing a token before each read-side
 * unlock and acquiring it where a grace period has ended (the top of each call_rcu callback,
 * after synchronize_rcu).  Under AddressSanitizer a kept snapshot block is poisoned, so a use
 * after its grace period is reported as a use after free() would be.  The recipe and why each
 * step is needed: docs/sanitizers.md. */
#ifndef CHRING_SHIM_H
#define CHRING_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ck_pr.h>
#include <urcu-bp.h>

#if defined(__SANITIZE_THREAD__)
#define CHRING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHRING_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CHRING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHRING_ASAN 1
#endif
#endif

/* ---- RCU publication ---------------------------------------------------------------------- */

#ifdef CHRING_TSAN
#include <sanitizer/tsan_interface.h>
extern char chring__tsan_grace_token;
#define CHRING_RCU_ASSIGN(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define CHRING_RCU_DEREF(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
/* Every read section's end, told to TSan (liburcu's read side is uninstrumented): what the
 * section read happens before a grace period that ends after it (CHRING_GRACE_ENDED, on the side
 * that frees).  Each rcu_read_unlock of the library is preceded by it; without it TSan took a
 * flap's prev, read by chring_member_stats and freed by its call_rcu callback, for a race. */
#define CHRING_GRACE_READER_DONE() __tsan_release(&chring__tsan_grace_token)
#define CHRING_GRACE_ENDED() __tsan_acquire(&chring__tsan_grace_token)
/* rcu_barrier(), told to TSan: a call_rcu callback's end happens before rcu_barrier returns
 * (liburcu's completion is uninstrumented).  Then no suppression of liburcu hides what those
 * callbacks (and the user's retire, which they call) did. */
extern char chring__tsan_barrier_token;
/* call_rcu's queue, told to TSan: what the writer did before queueing a callback happens before
 * the callback (which begins with CHRING_GRACE_ENDED, an acquire of the same token). */
#define CHRING_CALLBACK_QUEUED() __tsan_release(&chring__tsan_grace_token)
#define CHRING_CALLBACK_DONE() __tsan_release(&chring__tsan_barrier_token)
#define CHRING_BARRIER_ENDED() __tsan_acquire(&chring__tsan_barrier_token)
#else
#define CHRING_RCU_ASSIGN(p, v) rcu_assign_pointer((p), (v))
#define CHRING_RCU_DEREF(p) rcu_dereference(p)
#define CHRING_GRACE_READER_DONE() ((void)0)
#define CHRING_GRACE_ENDED() ((void)0)
#define CHRING_CALLBACK_QUEUED() ((void)0)
#define CHRING_CALLBACK_DONE() ((void)0)
#define CHRING_BARRIER_ENDED() ((void)0)
#endif

/* ---- plain atomic loads and stores of shared counters ------------------------------------- */

/* ck 0.7's ck_pr_load/ck_pr_store are volatile accesses even with CK_USE_CC_BUILTINS, which TSan
 * takes for plain ones racing with the fetch-and-adds; under TSan use the C11 builtins (relaxed:
 * these are counters and flags whose ordering comes from the RMWs and the RCU publish).  On
 * x86-64 both compile to the same mov. */
#ifdef CHRING_TSAN
#define CHRING_LOAD_64(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define CHRING_LOAD_32(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define CHRING_STORE_64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define CHRING_STORE_32(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#else
#define CHRING_LOAD_64(p) ck_pr_load_64(p)
#define CHRING_LOAD_32(p) ck_pr_load_32(p)
#define CHRING_STORE_64(p, v) ck_pr_store_64((p), (v))
#define CHRING_STORE_32(p, v) ck_pr_store_32((p), (v))
#endif

/* Pointers published to readers outside RCU's own pointer (a flap's prev, ghost.c): a release
 * store after the pointee's words, an acquire load before reading them. */
#define CHRING_LOAD_PTR(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define CHRING_STORE_PTR(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* ---- memory poisoning of kept blocks ------------------------------------------------------ */

#ifdef CHRING_ASAN
#include <sanitizer/asan_interface.h>
#define CHRING_POISON_BLOCK(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define CHRING_UNPOISON_BLOCK(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define CHRING_POISON_BLOCK(p, n) ((void)(p), (void)(n))
#define CHRING_UNPOISON_BLOCK(p, n) ((void)(p), (void)(n))
#endif

/* ---- layout and branch hints -------------------------------------------------------------- */

#define CHRING_CACHELINE 64
/* Written-by-one-thread lines that others read or write sit this far apart: Intel's adjacent-line
 * prefetcher fetches 64-byte lines in 128-byte aligned pairs, so neighbours 64 bytes apart still
 * bounce between cores together. */
#define CHRING_DESTRUCTIVE 128
#define CHRING_LIKELY(x) __builtin_expect(!!(x), 1)
#define CHRING_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#define CHRING_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* The read side's search, inlined into every lookup whatever its size (two widths of positions
 * made it large enough that GCC 12 called it instead: 15-18 % slower pre-hashed lookups on the
 * rings in the cache, docs/bench.md §11f; the packed index made GCC split the plain lookup's
 * bucket part out of line, docs/bench.md §11g). */
#define CHRING_HOT_INLINE static inline __attribute__((always_inline))

#endif
