/* Threads: five threads contend on one counter without a lost update; a wait is cancelled from
 * another thread (and leaves nothing in Redis); closing the client ends a wait. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "harness.h"

enum { THREADS = 5, ROUNDS = 20 };

typedef struct counter_run {
    rl_lock lock;           /* shared by every thread: handles are thread-safe */
    atomic_long counter;    /* read, then written later: without the lock, updates get lost */
    atomic_int failures;
} counter_run;

static void *count_under_the_lock(void *arg) {
    counter_run *run = arg;
    rl_owner owner = {0}; /* one owner per thread: the threads exclude each other */
    if (rl_owner_random(&owner, NULL) != RL_OK) {
        atomic_fetch_add(&run->failures, 1);
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        if (rl_lock_acquire(run->lock, owner, 10000, RL_LEASE_WATCHDOG, NULL, NULL) != RL_OK) {
            atomic_fetch_add(&run->failures, 1);
            continue;
        }
        long seen = atomic_load(&run->counter);
        sleep_ms(1); /* widen the window a missing exclusion would need */
        atomic_store(&run->counter, seen + 1);
        if (rl_lock_release(run->lock, owner, NULL, NULL) != RL_OK) {
            atomic_fetch_add(&run->failures, 1);
        }
    }
    rl_owner_free(&owner, NULL);
    return NULL;
}

static void five_threads_count_without_a_lost_update(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    counter_run run = {0};
    pthread_t threads[THREADS];
    TRY(rl_client_lock(client, unique_name("counter"), &run.lock, &err), &err);
    for (int i = 0; i < THREADS; i++) {
        REQUIRE(pthread_create(&threads[i], NULL, count_under_the_lock, &run) == 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    CHECK(atomic_load(&run.failures) == 0);
    CHECK(atomic_load(&run.counter) == THREADS * ROUNDS);
done:
    rl_lock_free(&run.lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

typedef struct waiter {
    rl_lock lock;
    rl_owner owner;
    rl_cancel cancel;
    rl_status status;
    int64_t returned_at;
} waiter;

static void *wait_forever(void *arg) {
    waiter *w = arg;
    w->status = rl_lock_acquire_ex(w->lock, w->owner, RL_WAIT_FOREVER, RL_LEASE_WATCHDOG, w->cancel,
                                   "c-test waiter", NULL, NULL, NULL);
    w->returned_at = now_ms();
    return NULL;
}

static bool no_waiting_writers(void *arg) {
    char *json = NULL;
    bool none = rl_lock_inspect(*(rl_lock *)arg, &json, NULL) == RL_OK &&
                json_has(json, "waiting_writers", "0");
    rl_string_free(json);
    return none;
}

static void a_wait_is_cancelled_from_another_thread_and_leaves_nothing(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_owner holder = {0};
    waiter w = {.status = RL_INTERNAL};
    pthread_t thread;
    const char *name = unique_name("cancel");
    TRY(rl_client_lock(client, name, &w.lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&w.owner, &err), &err);
    TRY(rl_cancel_new(&w.cancel, &err), &err);
    TRY(rl_lock_acquire(w.lock, holder, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    REQUIRE(pthread_create(&thread, NULL, wait_forever, &w) == 0);
    sleep_ms(300);
    CHECK(!no_waiting_writers(&w.lock)); /* the waiter is announced in Redis */
    int64_t triggered_at = now_ms();
    CHECK_OK(rl_cancel_trigger(w.cancel, &err), &err);
    pthread_join(thread, NULL);
    CHECK_STATUS(RL_CANCELLED, w.status, NULL);
    CHECK(w.returned_at - triggered_at < 1000);
    bool triggered = false;
    CHECK_OK(rl_cancel_is_triggered(w.cancel, &triggered, &err), &err);
    CHECK(triggered);
    CHECK(eventually(no_waiting_writers, &w.lock, 2000)); /* its announcement is withdrawn */
    /* An already-triggered token cancels at once, even when the lock is free. */
    CHECK_OK(rl_lock_release(w.lock, holder, NULL, &err), &err);
    CHECK_STATUS(RL_CANCELLED,
                 rl_lock_acquire_ex(w.lock, w.owner, 0, 1000, w.cancel, NULL, NULL, NULL, &err),
                 &err);
    CHECK(redis_key_count(name) == 0);
done:
    rl_cancel_free(&w.cancel, NULL);
    rl_owner_free(&w.owner, NULL);
    rl_owner_free(&holder, NULL);
    rl_lock_free(&w.lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void closing_the_client_ends_a_wait(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_owner holder = {0};
    waiter w = {.status = RL_INTERNAL};
    pthread_t thread;
    TRY(rl_client_lock(client, unique_name("close-wait"), &w.lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&w.owner, &err), &err);
    TRY(rl_lock_acquire(w.lock, holder, 0, 2000, NULL, &err), &err);
    REQUIRE(pthread_create(&thread, NULL, wait_forever, &w) == 0);
    sleep_ms(200);
    int64_t closed_at = now_ms();
    CHECK_OK(rl_client_close(client, &err), &err);
    pthread_join(thread, NULL);
    CHECK_STATUS(RL_CLOSED, w.status, NULL);
    CHECK(w.returned_at - closed_at < 1000);
done:
    rl_owner_free(&w.owner, NULL);
    rl_owner_free(&holder, NULL);
    rl_lock_free(&w.lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

const test_case thread_tests[] = {
    {"threads: five threads count without a lost update",
     five_threads_count_without_a_lost_update},
    {"threads: a wait is cancelled from another thread and leaves nothing in Redis",
     a_wait_is_cancelled_from_another_thread_and_leaves_nothing},
    {"threads: closing the client ends a wait", closing_the_client_ends_a_wait},
    {NULL, NULL},
};
