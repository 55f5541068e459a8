/* A small test harness for the C suite: checks, a throwaway redis-server, and helpers.
 *
 * Tests are plain functions; CHECK records a failure (with file, line and the library's error
 * message) and lets the test go on, REQUIRE ends the test. main.c prints "N passed, N failed". */
#ifndef REDLOCK_TEST_HARNESS_H
#define REDLOCK_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "redlock.h"

/* ---- checks ---------------------------------------------------------------------------- */

/* Set when a check of the current test failed. */
extern bool test_failed;

void check_failed(const char *file, int line, const char *what, const char *detail);

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) check_failed(__FILE__, __LINE__, #cond, NULL);         \
    } while (0)

#define REQUIRE(cond)                                                       \
    do {                                                                    \
        if (!(cond)) {                                                      \
            check_failed(__FILE__, __LINE__, #cond, NULL);                  \
            return;                                                         \
        }                                                                   \
    } while (0)

/* Checks that `call` returns `expected`; on a mismatch reports both names and err's message. */
#define CHECK_STATUS(expected, call, err)                                   \
    check_status(__FILE__, __LINE__, #call, (expected), (call), (err))
#define CHECK_OK(call, err) CHECK_STATUS(RL_OK, call, err)
#define REQUIRE_OK(call, err)                                               \
    do {                                                                    \
        if (!CHECK_OK(call, err)) return;                                   \
    } while (0)

/* Like REQUIRE_OK, but jumps to the test's `done:` label so that its clean-up still runs. */
#define TRY(call, err)                                                      \
    do {                                                                    \
        if (!CHECK_OK(call, err)) goto done;                                \
    } while (0)

bool check_status(const char *file, int line, const char *call, rl_status expected,
                  rl_status actual, const rl_error *err);

/* ---- the throwaway redis-server --------------------------------------------------------- */

/* Starts redis-server on a free loopback port with its files in a new temporary directory. */
bool redis_start(void);
/* Kills it (SIGKILL) and removes its directory. */
void redis_stop(void);
/* "redis://127.0.0.1:PORT" of the running server. */
const char *redis_url(void);
/* Sends one command; returns its raw RESP reply in `reply` (truncated to `cap`). */
bool redis_command(char *reply, size_t cap, int argc, const char *const *argv);
/* The number of keys whose name contains `fragment` (-1 on error). Every key of a lock has its
 * name in it (the hash tag), so this counts what a lock left behind; the per-slot fencing
 * counters are shared by all names and stay by design. */
long redis_key_count(const char *fragment);

/* ---- helpers --------------------------------------------------------------------------- */

/* A client on the test server with default settings (aborts the test run if it cannot). */
rl_client connect_default(void);
/* A lock name unique to this process and call, with `tag` in it for readable failures. */
const char *unique_name(const char *tag);
/* Milliseconds on a monotonic clock. */
int64_t now_ms(void);
void sleep_ms(int64_t ms);
/* Calls `done(arg)` every 10 ms until it returns true or `limit_ms` pass; true if it did. */
bool eventually(bool (*done)(void *), void *arg, int64_t limit_ms);
/* Whether the lock view `*(rl_lock *)lock` has no waiting writer in Redis (for `eventually`). */
bool no_waiting_writers(void *lock);
/* Whether the lock view `*(rl_lock *)lock` has exactly one waiting writer in Redis. */
bool one_waiting_writer(void *lock);
/* Whether the JSON text has `"key":value` exactly (no spaces, as the library writes it). */
bool json_has(const char *json, const char *key, const char *value);

/* ---- the suites ------------------------------------------------------------------------ */

typedef struct test_case {
    const char *name;
    void (*run)(void);
} test_case;

extern const test_case exclusive_tests[];
extern const test_case rwlock_tests[];
extern const test_case lease_tests[];
extern const test_case bad_input_tests[];
extern const test_case handle_tests[];
extern const test_case thread_tests[];
extern const test_case pending_tests[];
extern const test_case lifecycle_tests[];
extern const test_case fork_tests[];
extern const test_case log_tests[];

#endif
