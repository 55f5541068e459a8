/* Lifecycle edges of the C ABI, from an audit (2026-11-26): callbacks that free their own
 * client, waits that must end, stale handles, and cancels, frees and timeouts racing a release. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- a thread with a deadline ---- */
typedef struct job {
    void *(*fn)(void *);
    void *arg;
    atomic_int done;
} job;
static void *job_main(void *p) {
    job *j = p;
    j->fn(j->arg);
    atomic_store(&j->done, 1);
    return NULL;
}
static bool job_done(void *p) { return atomic_load(&((job *)p)->done) != 0; }
/* Frees a job and its argument once its thread is done (one that hangs keeps them). */
static void job_free(job *j) {
    if (j && job_done(j)) {
        free(j->arg);
        free(j);
    }
}
/* Starts fn(arg) on a thread; the job struct must outlive it (leaked if it hangs). */
static job *job_start(void *(*fn)(void *), void *arg) {
    job *j = calloc(1, sizeof *j);
    j->fn = fn;
    j->arg = arg;
    pthread_t t;
    pthread_create(&t, NULL, job_main, j);
    pthread_detach(t);
    return j;
}

/* ---- callbacks that free their own client ---- */
typedef struct selfclose {
    rl_client client;
    atomic_int entered, returned;
    rl_status free_status;
} selfclose;

static void free_own_client_lost(void *ud, const rl_lock_lost_event *e) {
    (void)e;
    selfclose *s = ud;
    atomic_store(&s->entered, 1);
    s->free_status = rl_client_free(&s->client, NULL);
    atomic_store(&s->returned, 1);
}
static void free_own_client_contention(void *ud, const rl_contention_alert *a) {
    (void)a;
    selfclose *s = ud;
    if (atomic_exchange(&s->entered, 1)) return;
    s->free_status = rl_client_free(&s->client, NULL);
    atomic_store(&s->returned, 1);
}
static bool cb_returned(void *p) { return atomic_load(&((selfclose *)p)->returned) != 0; }

typedef struct acq_args {
    rl_lock lock;
    rl_owner owner;
    int64_t wait_ms, lease_ms;
    rl_cancel cancel;
    rl_status status;
    int64_t took_ms;
} acq_args;
static void *do_acquire(void *p) {
    acq_args *a = p;
    int64_t t0 = now_ms();
    a->status = rl_lock_acquire_ex(a->lock, a->owner, a->wait_ms, a->lease_ms, a->cancel, NULL,
                                   NULL, NULL, NULL);
    a->took_ms = now_ms() - t0;
    return NULL;
}

static void contention_callback_frees_its_own_client(void) {
    rl_error err = {0};
    selfclose *s = calloc(1, sizeof *s);
    rl_client admin = connect_default();
    rl_lock held = {0};
    rl_owner holder = {0};
    acq_args *a = calloc(1, sizeof *a);
    job *j = NULL;
    const char *name = unique_name("lifecycle-contention-free");
    rl_options o = {0};
    TRY(rl_options_new(&o, &err), &err);
    TRY(rl_options_set_contention_alert(o, 150, -1, &err), &err);
    TRY(rl_options_set_on_contention(o, free_own_client_contention, s, &err), &err);
    TRY(rl_client_connect(redis_url(), o, &s->client, &err), &err);
    TRY(rl_client_lock(admin, name, &held, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_lock_acquire(held, holder, 0, 10000, NULL, &err), &err);
    TRY(rl_client_lock(s->client, name, &a->lock, &err), &err);
    TRY(rl_owner_random(&a->owner, &err), &err);
    a->wait_ms = 4000;
    a->lease_ms = 10000;
    j = job_start(do_acquire, a);
    bool returned = eventually(cb_returned, s, 3000);
    CHECK(returned); /* the callback's rl_client_free returned */
    if (returned) CHECK(s->free_status == RL_OK);
    bool ended = eventually(job_done, j, 2000); /* waiter must end with RL_CLOSED */
    CHECK(ended);
    if (ended) {
        CHECK(a->status == RL_CLOSED);
        if (a->status != RL_CLOSED) fprintf(stderr, "    waiter status %s after %lld ms\n",
                                            rl_status_name(a->status), (long long)a->took_ms);
    }
    rl_lock_release(held, holder, NULL, NULL);
    rl_lock_free(&a->lock, NULL);
    rl_owner_free(&a->owner, NULL);
done:
    rl_options_free(&o, NULL);
    rl_lock_free(&held, NULL);
    rl_owner_free(&holder, NULL);
    rl_client_free(&admin, NULL);
    rl_error_free(&err);
    if (j) job_free(j);
    else free(a);
    if (cb_returned(s)) free(s);
}

static void lost_callback_frees_its_own_client(void) {
    rl_error err = {0};
    selfclose *s = calloc(1, sizeof *s);
    rl_client admin = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_options o = {0};
    const char *name = unique_name("lifecycle-lost-free");
    TRY(rl_options_new(&o, &err), &err);
    TRY(rl_options_set_lease_ms(o, 300, &err), &err);
    TRY(rl_options_set_on_lock_lost(o, free_own_client_lost, s, &err), &err);
    TRY(rl_client_connect(redis_url(), o, &s->client, &err), &err);
    TRY(rl_client_lock(s->client, name, &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire(lock, owner, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    bool was = false;
    TRY(rl_client_force_unlock(admin, name, &was, &err), &err);
    CHECK(eventually(cb_returned, s, 3000));
    CHECK(s->free_status == RL_OK);
    CHECK_STATUS(RL_CLOSED, rl_lock_release(lock, owner, NULL, &err), &err);
done:
    rl_options_free(&o, NULL);
    rl_lock_free(&lock, NULL);
    rl_owner_free(&owner, NULL);
    rl_client_free(&admin, NULL);
    rl_error_free(&err);
    if (cb_returned(s)) free(s);
}

/* ---- waits that must end ---- */
typedef struct wl_args {
    rl_hold hold;
    rl_status status;
    bool lost;
} wl_args;
static void *do_wait_lost(void *p) {
    wl_args *w = p;
    w->status = rl_hold_wait_lost(w->hold, RL_WAIT_FOREVER, (rl_cancel){0}, &w->lost, NULL);
    return NULL;
}

static void wait_lost_forever_ends_when_the_client_closes(void) {
    rl_error err = {0};
    rl_client c = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    wl_args *w = calloc(1, sizeof *w);
    job *j = NULL;
    TRY(rl_client_lock(c, unique_name("lifecycle-waitlost-close"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL,
                           &w->hold, &err), &err);
    j = job_start(do_wait_lost, w);
    sleep_ms(100);
    CHECK_OK(rl_client_close(c, &err), &err);
    bool ended = eventually(job_done, j, 3000);
    CHECK(ended); /* a closed client's watched holds count as lost */
    if (ended) {
        CHECK(w->status == RL_OK || w->status == RL_CLOSED);
    } else {
        fprintf(stderr, "    rl_hold_wait_lost(FOREVER) still blocked 3 s after rl_client_close\n");
    }
done:
    rl_lock_free(&lock, NULL);
    rl_owner_free(&owner, NULL);
    rl_client_free(&c, NULL);
    rl_error_free(&err);
    if (j && job_done(j)) rl_hold_free(&w->hold, NULL);
    if (j) job_free(j);
    else free(w);
}

static void wait_lost_forever_ends_when_the_client_is_freed(void) {
    rl_error err = {0};
    rl_client c = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    wl_args *w = calloc(1, sizeof *w);
    job *j = NULL;
    TRY(rl_client_lock(c, unique_name("lifecycle-waitlost-free"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL,
                           &w->hold, &err), &err);
    j = job_start(do_wait_lost, w);
    sleep_ms(100);
    rl_lock_free(&lock, NULL);
    CHECK_OK(rl_client_free(&c, &err), &err);
    bool ended = eventually(job_done, j, 3000);
    CHECK(ended);
    if (!ended) fprintf(stderr, "    rl_hold_wait_lost(FOREVER) still blocked 3 s after rl_client_free\n");
done:
    rl_lock_free(&lock, NULL);
    rl_owner_free(&owner, NULL);
    rl_client_free(&c, NULL);
    rl_error_free(&err);
    if (j && job_done(j)) rl_hold_free(&w->hold, NULL);
    if (j) job_free(j);
    else free(w);
}

typedef struct pw_args {
    rl_pending pending;
    rl_status status;
    bool done;
} pw_args;
static void *do_pending_wait(void *p) {
    pw_args *w = p;
    w->status = rl_pending_wait(w->pending, RL_WAIT_FOREVER, &w->done, NULL, NULL, NULL);
    return NULL;
}

static void pending_wait_forever_ends_when_another_thread_frees_it(void) {
    rl_error err = {0};
    rl_client c = connect_default();
    rl_lock lock = {0};
    rl_owner holder = {0}, waiter = {0};
    pw_args *w = calloc(1, sizeof *w);
    job *j = NULL;
    const char *name = unique_name("lifecycle-pending-free");
    TRY(rl_client_lock(c, name, &lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&waiter, &err), &err);
    TRY(rl_lock_acquire(lock, holder, 0, 10000, NULL, &err), &err);
    TRY(rl_lock_acquire_start(lock, waiter, RL_WAIT_FOREVER, 10000, (rl_cancel){0}, NULL, 0, NULL,
                              NULL, NULL, NULL, &w->pending, &err), &err);
    REQUIRE(w->pending.id != 0);
    rl_pending copy = w->pending;
    j = job_start(do_pending_wait, w);
    sleep_ms(100);
    CHECK_OK(rl_pending_free(&copy, &err), &err);
    bool ended = eventually(job_done, j, 3000);
    CHECK(ended);
    if (ended) CHECK(w->status == RL_CANCELLED);
    if (ended && w->status != RL_CANCELLED) fprintf(stderr, "    pending_wait returned %s\n", rl_status_name(w->status));
    CHECK_OK(rl_lock_release(lock, holder, NULL, &err), &err);
    sleep_ms(200);
    bool held = true;
    CHECK_OK(rl_lock_is_locked(lock, &held, &err), &err);
    CHECK(!held);
done:
    rl_lock_free(&lock, NULL);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter, NULL);
    rl_client_free(&c, NULL);
    rl_error_free(&err);
    if (j) job_free(j);
    else free(w);
}

/* ---- races: a failed acquire must never hold the lock ---- */
static void cancel_racing_a_release_never_leaves_the_waiter_holding(void) {
    rl_error err = {0};
    rl_client c = connect_default();
    rl_lock lock = {0};
    rl_owner holder = {0}, waiter = {0};
    int bad = 0, rounds = 40;
    const char *name = unique_name("lifecycle-cancel-race");
    TRY(rl_client_lock(c, name, &lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&waiter, &err), &err);
    for (int i = 0; i < rounds; i++) {
        acq_args a = {.lock = lock, .owner = waiter, .wait_ms = 5000, .lease_ms = 20000};
        TRY(rl_cancel_new(&a.cancel, &err), &err);
        TRY(rl_lock_acquire(lock, holder, 0, 20000, NULL, &err), &err);
        pthread_t t;
        pthread_create(&t, NULL, do_acquire, &a);
        sleep_ms(30);
        /* release and cancel at (nearly) the same moment */
        rl_lock_release(lock, holder, NULL, NULL);
        if (i % 2) sleep_ms(i % 5);
        rl_cancel_trigger(a.cancel, NULL);
        pthread_join(t, NULL);
        bool held = false;
        rl_lock_is_held_by(lock, waiter, &held, NULL);
        if (a.status != RL_OK && held) {
            bad++;
            sleep_ms(1000);
            bool still = false;
            rl_lock_is_held_by(lock, waiter, &still, NULL);
            fprintf(stderr, "    round %d: acquire said %s but the waiter holds the lock (still 1 s later: %d)\n", i,
                    rl_status_name(a.status), still);
        }
        if (held) rl_lock_force_unlock(lock, NULL, NULL);
        rl_cancel_free(&a.cancel, NULL);
    }
    CHECK(bad == 0);
done:
    rl_lock_free(&lock, NULL);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter, NULL);
    rl_client_free(&c, NULL);
    rl_error_free(&err);
}

static void pending_free_racing_a_release_leaves_nothing_held(void) {
    rl_error err = {0};
    rl_client c = connect_default();
    rl_lock lock = {0};
    rl_owner holder = {0}, waiter = {0};
    int bad = 0, rounds = 40;
    const char *name = unique_name("lifecycle-pending-race");
    TRY(rl_client_lock(c, name, &lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&waiter, &err), &err);
    for (int i = 0; i < rounds; i++) {
        rl_pending p = {0};
        TRY(rl_lock_acquire(lock, holder, 0, 20000, NULL, &err), &err);
        TRY(rl_lock_acquire_start(lock, waiter, 5000, 20000, (rl_cancel){0}, NULL, 0, NULL, NULL,
                                  NULL, NULL, &p, &err), &err);
        rl_lock_release(lock, holder, NULL, NULL);
        if (i % 3) sleep_ms(i % 4);
        rl_pending_free(&p, NULL);
        /* the hold (if granted) is given back in the background: allow it a moment */
        int64_t until = now_ms() + 1500;
        bool held = true;
        while (now_ms() < until) {
            rl_lock_is_held_by(lock, waiter, &held, NULL);
            if (!held) break;
            sleep_ms(10);
        }
        if (held) {
            bad++;
            fprintf(stderr, "    round %d: a freed pending acquire left the waiter holding\n", i);
            rl_lock_force_unlock(lock, NULL, NULL);
        }
    }
    CHECK(bad == 0);
done:
    rl_lock_free(&lock, NULL);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter, NULL);
    rl_client_free(&c, NULL);
    rl_error_free(&err);
}

static void timeout_racing_a_release_never_leaves_the_waiter_holding(void) {
    rl_error err = {0};
    rl_client c = connect_default();
    rl_lock lock = {0};
    rl_owner holder = {0}, waiter = {0};
    int bad = 0, rounds = 40;
    TRY(rl_client_lock(c, unique_name("lifecycle-timeout-race"), &lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&waiter, &err), &err);
    for (int i = 0; i < rounds; i++) {
        acq_args a = {.lock = lock, .owner = waiter, .wait_ms = 50, .lease_ms = 20000};
        TRY(rl_lock_acquire(lock, holder, 0, 20000, NULL, &err), &err);
        pthread_t t;
        pthread_create(&t, NULL, do_acquire, &a);
        sleep_ms(45 + i % 10);
        rl_lock_release(lock, holder, NULL, NULL);
        pthread_join(t, NULL);
        bool held = false;
        rl_lock_is_held_by(lock, waiter, &held, NULL);
        if (a.status != RL_OK && held) {
            bad++;
            fprintf(stderr, "    round %d: acquire said %s but the waiter holds the lock\n", i,
                    rl_status_name(a.status));
        }
        if (held) rl_lock_force_unlock(lock, NULL, NULL);
    }
    CHECK(bad == 0);
done:
    rl_lock_free(&lock, NULL);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter, NULL);
    rl_client_free(&c, NULL);
    rl_error_free(&err);
}

/* ---- handles used after free from other threads ---- */
static void stale_handles_after_free_are_invalid_handle(void) {
    rl_error err = {0};
    rl_cancel cancel = {0};
    TRY(rl_cancel_new(&cancel, &err), &err);
    rl_cancel copy = cancel;
    CHECK_OK(rl_cancel_free(&cancel, &err), &err);
    CHECK_STATUS(RL_INVALID_HANDLE, rl_cancel_trigger(copy, &err), &err);
    CHECK_STATUS(RL_INVALID_HANDLE, rl_cancel_free(&copy, &err), &err);
    rl_pending p = {0x5208000000000001ull};
    bool d;
    CHECK_STATUS(RL_INVALID_HANDLE, rl_pending_wait(p, 0, &d, NULL, NULL, &err), &err);
    CHECK_STATUS(RL_INVALID_HANDLE, rl_pending_free(&p, &err), &err);
done:
    rl_error_free(&err);
}

const test_case lifecycle_tests[] = {
    {"lifecycle: stale handles after free are RL_INVALID_HANDLE", stale_handles_after_free_are_invalid_handle},
    {"lifecycle: contention callback frees its own client", contention_callback_frees_its_own_client},
    {"lifecycle: lost callback frees its own client", lost_callback_frees_its_own_client},
    {"lifecycle: wait_lost(FOREVER) ends when the client closes", wait_lost_forever_ends_when_the_client_closes},
    {"lifecycle: wait_lost(FOREVER) ends when the client is freed", wait_lost_forever_ends_when_the_client_is_freed},
    {"lifecycle: pending_wait(FOREVER) ends when another thread frees it", pending_wait_forever_ends_when_another_thread_frees_it},
    {"lifecycle: cancel racing a release never leaves the waiter holding", cancel_racing_a_release_never_leaves_the_waiter_holding},
    {"lifecycle: pending free racing a release leaves nothing held", pending_free_racing_a_release_leaves_nothing_held},
    {"lifecycle: timeout racing a release never leaves the waiter holding", timeout_racing_a_release_never_leaves_the_waiter_holding},
    {NULL, NULL},
};
