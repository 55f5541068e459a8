/* The read/write lock: the contract's rule 2 (shared readers, exclusive writer, reentrancy,
 * downgrade, immediate UpgradeNotAllowed, writers not starved, one lease per reader). */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <string.h>

#include "harness.h"

/* A read/write lock with both views, and owners, for one test. */
typedef struct fixture {
    rl_client client;
    rl_rwlock rw;
    rl_lock read, write;
    rl_owner a, b, c;
    rl_error err;
    const char *name;
} fixture;

static bool fixture_open(fixture *f, const char *tag) {
    memset(f, 0, sizeof *f);
    f->client = connect_default();
    f->name = unique_name(tag);
    return CHECK_OK(rl_client_read_write_lock(f->client, f->name, &f->rw, &f->err),
                    &f->err) &&
           CHECK_OK(rl_rwlock_read(f->rw, &f->read, &f->err), &f->err) &&
           CHECK_OK(rl_rwlock_write(f->rw, &f->write, &f->err), &f->err) &&
           CHECK_OK(rl_owner_random(&f->a, &f->err), &f->err) &&
           CHECK_OK(rl_owner_random(&f->b, &f->err), &f->err) &&
           CHECK_OK(rl_owner_random(&f->c, &f->err), &f->err);
}

static void fixture_close(fixture *f) {
    rl_owner_free(&f->a, NULL);
    rl_owner_free(&f->b, NULL);
    rl_owner_free(&f->c, NULL);
    rl_lock_free(&f->read, NULL);
    rl_lock_free(&f->write, NULL);
    rl_rwlock_free(&f->rw, NULL);
    rl_client_free(&f->client, NULL);
    rl_error_free(&f->err);
}

static void readers_share_and_a_writer_excludes_everyone(void) {
    fixture f;
    if (!fixture_open(&f, "rw-share")) {
        fixture_close(&f);
        return;
    }
    rl_error *err = &f.err;
    CHECK_OK(rl_lock_acquire(f.read, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_OK(rl_lock_acquire(f.read, f.b, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(f.write, f.c, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    char *json = NULL;
    CHECK_OK(rl_lock_inspect(f.read, &json, err), err);
    CHECK(json_has(json, "mode", "\"read\"") && json_has(json, "holder_count", "2"));
    rl_string_free(json);
    CHECK_OK(rl_lock_release(f.read, f.a, NULL, err), err);
    CHECK_OK(rl_lock_release(f.read, f.b, NULL, err), err);

    CHECK_OK(rl_lock_acquire(f.write, f.c, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(f.read, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(f.write, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    /* The writer re-enters its write hold. */
    rl_acquired again = {0};
    CHECK_OK(rl_lock_acquire(f.write, f.c, 0, RL_LEASE_WATCHDOG, &again, err), err);
    CHECK(again.hold_count == 2);
    CHECK_OK(rl_lock_release(f.write, f.c, NULL, err), err);
    CHECK_OK(rl_lock_release(f.write, f.c, NULL, err), err);
    CHECK(redis_key_count(f.name) == 0);
    fixture_close(&f);
}

static void the_writer_may_downgrade_to_reading(void) {
    fixture f;
    if (!fixture_open(&f, "rw-downgrade")) {
        fixture_close(&f);
        return;
    }
    rl_error *err = &f.err;
    CHECK_OK(rl_lock_acquire(f.write, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_OK(rl_lock_acquire(f.read, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_OK(rl_lock_release(f.write, f.a, NULL, err), err);
    bool reading = false, writing = true;
    CHECK_OK(rl_lock_is_held_by(f.read, f.a, &reading, err), err);
    CHECK_OK(rl_lock_is_held_by(f.write, f.a, &writing, err), err);
    CHECK(reading && !writing);
    /* Now only a reader: others may read, nobody may write. */
    CHECK_OK(rl_lock_acquire(f.read, f.b, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(f.write, f.c, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_OK(rl_lock_release(f.read, f.a, NULL, err), err);
    CHECK_OK(rl_lock_release(f.read, f.b, NULL, err), err);
    fixture_close(&f);
}

static void a_reader_asking_to_write_fails_at_once(void) {
    fixture f;
    if (!fixture_open(&f, "rw-upgrade")) {
        fixture_close(&f);
        return;
    }
    rl_error *err = &f.err;
    CHECK_OK(rl_lock_acquire(f.read, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    int64_t started = now_ms();
    /* Even with no wait limit: never a hang (Redisson hangs here until the lease ends). */
    CHECK_STATUS(RL_UPGRADE_NOT_ALLOWED,
                 rl_lock_acquire(f.write, f.a, RL_WAIT_FOREVER, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK(now_ms() - started < 2000);
    CHECK(err->message && strstr(err->message, "upgrade"));
    CHECK_OK(rl_lock_release(f.read, f.a, NULL, err), err);
    fixture_close(&f);
}

typedef struct writer_wait {
    fixture *f;
    rl_status status;
} writer_wait;

static void *wait_to_write(void *arg) {
    writer_wait *w = arg;
    /* Long enough for the announcement to be polled for on a loaded machine (below). */
    w->status = rl_lock_acquire(w->f->write, w->f->c, 30000, RL_LEASE_WATCHDOG, NULL, NULL);
    return NULL;
}

static void a_waiting_writer_is_not_starved_by_new_readers(void) {
    fixture f;
    if (!fixture_open(&f, "rw-starve")) {
        fixture_close(&f);
        return;
    }
    rl_error *err = &f.err;
    CHECK_OK(rl_lock_acquire(f.read, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    writer_wait w = {&f, RL_INTERNAL};
    pthread_t writer;
    REQUIRE(pthread_create(&writer, NULL, wait_to_write, &w) == 0);
    /* The writer announces itself: polled for, since under load (valgrind, a busy CI machine)
     * its first attempt may come far later than usual. */
    CHECK(eventually(one_waiting_writer, &f.write, 10000));
    /* A new reader queues behind the waiting writer... */
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(f.read, f.b, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    /* ...while a current reader may still re-enter. */
    CHECK_OK(rl_lock_acquire(f.read, f.a, 0, RL_LEASE_WATCHDOG, NULL, err), err);
    CHECK_OK(rl_lock_release(f.read, f.a, NULL, err), err);
    CHECK_OK(rl_lock_release(f.read, f.a, NULL, err), err);
    pthread_join(writer, NULL);
    CHECK_STATUS(RL_OK, w.status, NULL);
    CHECK_OK(rl_lock_release(f.write, f.c, NULL, err), err);
    fixture_close(&f);
}

static void each_reader_has_its_own_lease(void) {
    fixture f;
    if (!fixture_open(&f, "rw-leases")) {
        fixture_close(&f);
        return;
    }
    rl_error *err = &f.err;
    CHECK_OK(rl_lock_acquire(f.read, f.a, 0, 200, NULL, err), err); /* "crashes": never renewed */
    CHECK_OK(rl_lock_acquire(f.read, f.b, 0, 20000, NULL, err), err);
    sleep_ms(400);
    bool a_reads = true, b_reads = false;
    CHECK_OK(rl_lock_is_held_by(f.read, f.a, &a_reads, err), err);
    CHECK_OK(rl_lock_is_held_by(f.read, f.b, &b_reads, err), err);
    CHECK(!a_reads && b_reads);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(f.read, f.a, NULL, err), err);
    CHECK_OK(rl_lock_release(f.read, f.b, NULL, err), err);
    fixture_close(&f);
}

const test_case rwlock_tests[] = {
    {"rwlock: readers share and a writer excludes everyone",
     readers_share_and_a_writer_excludes_everyone},
    {"rwlock: the writer may downgrade to reading", the_writer_may_downgrade_to_reading},
    {"rwlock: a reader asking to write fails at once with RL_UPGRADE_NOT_ALLOWED",
     a_reader_asking_to_write_fails_at_once},
    {"rwlock: a waiting writer is not starved by new readers",
     a_waiting_writer_is_not_starved_by_new_readers},
    {"rwlock: each reader has its own lease", each_reader_has_its_own_lease},
    {NULL, NULL},
};
