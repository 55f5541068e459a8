/* The seeds' scenarios in C, against a Redis given as argument (default redis://127.0.0.1:6379):
 *
 * 1. A read/write lock taken by one instance and released by another that was handed the owner
 *    token (seed 000: "lock and unlock may run on different instances"), with readers sharing.
 * 2. Five threads increment one counter under the exclusive lock: no update is lost.
 *
 * Build: make -C bindings/c build/example    Run: bindings/c/build/example redis://127.0.0.1:6379 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "redlock.h"

/* Prints the error and exits: an example keeps error handling short. */
static void must(rl_status status, rl_error *err, const char *what) {
    if (status == RL_OK) return;
    fprintf(stderr, "%s failed: %s: %s\n", what, rl_status_name(status),
            err->message ? err->message : "(no message)");
    exit(1);
}

static void instances_hand_over_a_read_write_lock(const char *url) {
    rl_error err = {0};
    rl_client instance_a = {0}, instance_b = {0};
    rl_rwlock rw_a = {0}, rw_b = {0};
    rl_lock write_a = {0}, write_b = {0}, read_a = {0}, read_b = {0};
    rl_owner writer = {0}, handed_over = {0}, reader_a = {0}, reader_b = {0};
    char *token = NULL;

    /* Two clients stand for two processes (or two languages: the token is just a string). */
    must(rl_client_connect(url, (rl_options){0}, &instance_a, &err), &err, "connect A");
    must(rl_client_connect(url, (rl_options){0}, &instance_b, &err), &err, "connect B");
    must(rl_client_read_write_lock(instance_a, "example:inventory", &rw_a, &err), &err, "rwlock");
    must(rl_client_read_write_lock(instance_b, "example:inventory", &rw_b, &err), &err, "rwlock");
    must(rl_rwlock_write(rw_a, &write_a, &err), &err, "write view");
    must(rl_rwlock_write(rw_b, &write_b, &err), &err, "write view");
    must(rl_rwlock_read(rw_a, &read_a, &err), &err, "read view");
    must(rl_rwlock_read(rw_b, &read_b, &err), &err, "read view");

    /* Instance A writes, under the watchdog, waiting up to 5 s. */
    rl_acquired acquired = {0};
    must(rl_owner_random(&writer, &err), &err, "owner");
    must(rl_lock_acquire(write_a, writer, 5000, RL_LEASE_WATCHDOG, &acquired, &err), &err,
         "write");
    must(rl_owner_token(writer, &token, &err), &err, "token");
    printf("A holds the write lock: fencing token %llu, owner token %s\n",
           (unsigned long long)acquired.fencing_token, token);

    /* Instance B was handed the token (a queue message, an HTTP header...) and releases. */
    must(rl_owner_from_token(token, &handed_over, &err), &err, "owner from token");
    uint32_t remaining = 0;
    must(rl_lock_release(write_b, handed_over, &remaining, &err), &err, "release by B");
    printf("B released A's write lock with the token (holds left: %u)\n", remaining);

    /* Now two readers, one per instance, share the lock; a writer would have to wait. */
    must(rl_owner_random(&reader_a, &err), &err, "owner");
    must(rl_owner_random(&reader_b, &err), &err, "owner");
    must(rl_lock_acquire(read_a, reader_a, 0, 10000, NULL, &err), &err, "read A");
    must(rl_lock_acquire(read_b, reader_b, 0, 10000, NULL, &err), &err, "read B");
    rl_status try_write = rl_lock_acquire(write_a, writer, 0, RL_LEASE_WATCHDOG, NULL, &err);
    printf("two readers hold it; a writer trying now gets %s\n", rl_status_name(try_write));
    char *json = NULL;
    must(rl_lock_inspect(read_a, &json, &err), &err, "inspect");
    printf("inspect: %s\n", json);
    must(rl_lock_release(read_a, reader_a, NULL, &err), &err, "release read A");
    must(rl_lock_release(read_b, reader_b, NULL, &err), &err, "release read B");

    rl_string_free(json);
    rl_string_free(token);
    rl_owner_free(&writer, NULL);
    rl_owner_free(&handed_over, NULL);
    rl_owner_free(&reader_a, NULL);
    rl_owner_free(&reader_b, NULL);
    rl_lock_free(&write_a, NULL);
    rl_lock_free(&write_b, NULL);
    rl_lock_free(&read_a, NULL);
    rl_lock_free(&read_b, NULL);
    rl_rwlock_free(&rw_a, NULL);
    rl_rwlock_free(&rw_b, NULL);
    rl_client_free(&instance_a, NULL);
    rl_client_free(&instance_b, NULL);
    rl_error_free(&err);
}

enum { THREADS = 5, ROUNDS = 20 };

typedef struct counter {
    rl_lock lock;  /* one handle, shared by the threads */
    long value;    /* guarded by the distributed lock only */
} counter;

static void *increment(void *arg) {
    counter *c = arg;
    rl_error err = {0};
    rl_owner me = {0}; /* one owner per thread, so the threads exclude each other */
    must(rl_owner_random(&me, &err), &err, "owner");
    for (int i = 0; i < ROUNDS; i++) {
        must(rl_lock_acquire(c->lock, me, RL_WAIT_FOREVER, RL_LEASE_WATCHDOG, NULL, &err), &err,
             "acquire");
        long seen = __atomic_load_n(&c->value, __ATOMIC_SEQ_CST);
        nanosleep(&(struct timespec){0, 1000000}, NULL); /* a read-modify-write that takes time */
        __atomic_store_n(&c->value, seen + 1, __ATOMIC_SEQ_CST);
        must(rl_lock_release(c->lock, me, NULL, &err), &err, "release");
    }
    rl_owner_free(&me, NULL);
    rl_error_free(&err);
    return NULL;
}

static void threads_contend_on_a_counter(const char *url) {
    rl_error err = {0};
    rl_client client = {0};
    counter c = {{0}, 0};
    must(rl_client_connect(url, (rl_options){0}, &client, &err), &err, "connect");
    must(rl_client_lock(client, "example:counter", &c.lock, &err), &err, "lock");
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, increment, &c);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    printf("%d threads x %d increments under the lock: counter = %ld (expected %d)\n", THREADS,
           ROUNDS, c.value, THREADS * ROUNDS);
    rl_lock_free(&c.lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
    if (c.value != THREADS * ROUNDS) exit(1);
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    printf("libredlock %s, Redis at %s\n", rl_version(), url);
    instances_hand_over_a_read_write_lock(url);
    threads_contend_on_a_counter(url);
    return 0;
}
