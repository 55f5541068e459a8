/* Threads: five threads contend on one counter without a lost update; a wait is cancelled from
 * another thread (and leaves nothing in Redis); closing the client ends a wait; a connect to a
 * server that never answers is cancelled from another thread. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    /* The waiter is announced in Redis (polled for: under load its first attempt may come late). */
    CHECK(eventually(one_waiting_writer, &w.lock, 10000));
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

typedef struct connecting {
    char url[64];
    rl_options options;
    rl_cancel cancel;
    rl_client client;
    rl_status status;
    int64_t returned_at;
} connecting;

static void *connect_cancellable(void *arg) {
    connecting *c = arg;
    c->status = rl_client_connect_ex(c->url, c->options, c->cancel, &c->client, NULL);
    c->returned_at = now_ms();
    return NULL;
}

/* A loopback port that accepts connections (the kernel's backlog) but never answers. */
static int silent_listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

static void a_connect_is_cancelled_from_another_thread(void) {
    rl_error err = {0};
    connecting c = {.status = RL_INTERNAL};
    pthread_t thread;
    int port = 0;
    int listener = silent_listener(&port);
    REQUIRE(listener >= 0);
    snprintf(c.url, sizeof c.url, "redis://127.0.0.1:%d", port);
    TRY(rl_options_new(&c.options, &err), &err);
    TRY(rl_options_set_connect_timeout_ms(c.options, 20000, &err), &err);
    TRY(rl_cancel_new(&c.cancel, &err), &err);
    REQUIRE(pthread_create(&thread, NULL, connect_cancellable, &c) == 0);
    sleep_ms(300);
    int64_t triggered_at = now_ms();
    CHECK_OK(rl_cancel_trigger(c.cancel, &err), &err);
    pthread_join(thread, NULL);
    CHECK_STATUS(RL_CANCELLED, c.status, NULL);
    CHECK(c.returned_at - triggered_at < 1000);
    CHECK(c.client.id == 0);
    /* A freed token is an invalid handle, not "not cancellable". */
    rl_cancel freed = c.cancel;
    CHECK_OK(rl_cancel_free(&c.cancel, &err), &err);
    CHECK_STATUS(RL_INVALID_HANDLE,
                 rl_client_connect_ex(c.url, c.options, freed, &c.client, &err), &err);
done:
    rl_cancel_free(&c.cancel, NULL);
    rl_options_free(&c.options, NULL);
    rl_client_free(&c.client, NULL);
    rl_error_free(&err);
    if (listener >= 0) {
        close(listener);
    }
}

const test_case thread_tests[] = {
    {"threads: five threads count without a lost update",
     five_threads_count_without_a_lost_update},
    {"threads: a wait is cancelled from another thread and leaves nothing in Redis",
     a_wait_is_cancelled_from_another_thread_and_leaves_nothing},
    {"threads: closing the client ends a wait", closing_the_client_ends_a_wait},
    {"threads: a connect to a server that never answers is cancelled from another thread",
     a_connect_is_cancelled_from_another_thread},
    {NULL, NULL},
};
