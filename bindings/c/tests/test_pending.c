/* Pending acquires (rl_lock_acquire_start): a wait that holds no thread calls back once, hands
 * out its outcome once, ends by timeout, cancel token, rl_pending_cancel, rl_pending_free or a
 * closed client, leaves nothing in Redis, and refuses bad arguments and handles. */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <string.h>

#include "harness.h"

/* What the on_done callback saw. Tests keep these in static storage: a callback that comes late
 * (after a failed check ended its test early) must not write to a dead stack frame. */
typedef struct notified {
    atomic_int calls;
} notified;

static void on_done(void *user_data) {
    atomic_fetch_add(&((notified *)user_data)->calls, 1);
}

static bool called(void *arg) {
    return atomic_load(&((notified *)arg)->calls) > 0;
}

/* Waits up to `limit_ms` for the pending acquire to end with `status`, then for its callback. */
static void expect_end(rl_pending pending, rl_status status, int64_t limit_ms, notified *n,
                       rl_error *err) {
    bool done_flag = false;
    CHECK_STATUS(status, rl_pending_wait(pending, limit_ms, &done_flag, NULL, NULL, err), err);
    CHECK(done_flag);
    CHECK(eventually(called, n, 2000));
}

/* A lock held by `holder` (watchdog lease) and a second owner to wait for it. */
typedef struct scene {
    rl_client client;
    rl_lock lock;
    rl_owner holder, waiter;
} scene;

static bool scene_start(scene *s, const char *tag, rl_error *err) {
    s->client = connect_default();
    return CHECK_OK(rl_client_lock(s->client, unique_name(tag), &s->lock, err), err) &&
           CHECK_OK(rl_owner_random(&s->holder, err), err) &&
           CHECK_OK(rl_owner_random(&s->waiter, err), err) &&
           CHECK_OK(rl_lock_acquire(s->lock, s->holder, 0, RL_LEASE_WATCHDOG, NULL, err), err);
}

static void scene_end(scene *s) {
    rl_owner_free(&s->waiter, NULL);
    rl_owner_free(&s->holder, NULL);
    rl_lock_free(&s->lock, NULL);
    rl_client_free(&s->client, NULL);
}

/* Starts an acquire of s->waiter (wait_ms) that must be left pending. */
static bool start_pending(scene *s, int64_t wait_ms, rl_cancel cancel, notified *n,
                          rl_pending *pending, rl_error *err) {
    rl_acquired acquired = {.fencing_token = 7};
    rl_hold hold = {.id = 7};
    bool ok = CHECK_OK(rl_lock_acquire_start(s->lock, s->waiter, wait_ms, RL_LEASE_WATCHDOG,
                                             cancel, "c-test pending", 0, on_done, n, &acquired,
                                             &hold, pending, err),
                       err);
    CHECK(pending->id != 0);
    CHECK(acquired.fencing_token == 0 && hold.id == 0); /* reset, not left stale */
    return ok && pending->id != 0;
}

static void a_free_lock_is_acquired_at_once_with_nothing_pending(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_pending pending = {.id = 42};
    rl_acquired acquired = {0};
    rl_hold hold = {0};
    static notified n;
    atomic_store(&n.calls, 0);
    TRY(rl_client_lock(client, unique_name("pending-free"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_start(lock, owner, RL_WAIT_FOREVER, 10000, (rl_cancel){0}, NULL, 0,
                              on_done, &n, &acquired, &hold, &pending, &err),
        &err);
    CHECK(pending.id == 0);
    CHECK(acquired.fencing_token > 0 && acquired.hold_count == 1);
    CHECK(hold.id != 0);
    CHECK(atomic_load(&n.calls) == 0);
    CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
done:
    rl_hold_free(&hold, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void a_pending_acquire_calls_back_once_and_hands_out_its_hold_once(void) {
    rl_error err = {0};
    scene s = {0};
    rl_pending pending = {0};
    rl_acquired acquired = {0};
    rl_hold hold = {0};
    static notified n;
    atomic_store(&n.calls, 0);
    bool done_flag = true;
    if (!scene_start(&s, "pending-handoff", &err)) goto done;
    if (!start_pending(&s, RL_WAIT_FOREVER, (rl_cancel){0}, &n, &pending, &err)) goto done;
    CHECK_OK(rl_pending_wait(pending, 0, &done_flag, &acquired, &hold, &err), &err);
    CHECK(!done_flag);
    CHECK(!no_waiting_writers(&s.lock)); /* it keeps its place in Redis' queue */
    sleep_ms(100);
    CHECK(atomic_load(&n.calls) == 0);

    TRY(rl_lock_release(s.lock, s.holder, NULL, &err), &err);
    CHECK(eventually(called, &n, 5000));
    CHECK_OK(rl_pending_wait(pending, 0, &done_flag, &acquired, &hold, &err), &err);
    CHECK(done_flag);
    CHECK(acquired.fencing_token > 0 && acquired.hold_count == 1);
    CHECK(hold.id != 0);
    bool held = false;
    CHECK_OK(rl_lock_is_held_by(s.lock, s.waiter, &held, &err), &err);
    CHECK(held);
    /* Once only; then freeing the handle leaves the hold with its owner. */
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_pending_wait(pending, 0, &done_flag, &acquired, NULL, &err), &err);
    CHECK_OK(rl_pending_free(&pending, &err), &err);
    CHECK(pending.id == 0);
    sleep_ms(100);
    CHECK(atomic_load(&n.calls) == 1);
    CHECK_OK(rl_lock_is_held_by(s.lock, s.waiter, &held, &err), &err);
    CHECK(held);
    CHECK_OK(rl_lock_release(s.lock, s.waiter, NULL, &err), &err);
done:
    rl_hold_free(&hold, NULL);
    rl_pending_free(&pending, NULL);
    scene_end(&s);
    rl_error_free(&err);
}

static void a_pending_acquire_ends_by_its_own_timeout(void) {
    rl_error err = {0};
    scene s = {0};
    rl_pending pending = {0};
    static notified n;
    atomic_store(&n.calls, 0);
    if (!scene_start(&s, "pending-timeout", &err)) goto done;
    if (!start_pending(&s, 150, (rl_cancel){0}, &n, &pending, &err)) goto done;
    expect_end(pending, RL_TIMEOUT, RL_WAIT_FOREVER, &n, &err);
    CHECK(eventually(no_waiting_writers, &s.lock, 2000));
done:
    rl_pending_free(&pending, NULL);
    scene_end(&s);
    rl_error_free(&err);
}

static void a_cancel_token_ends_a_pending_acquire_and_leaves_nothing(void) {
    rl_error err = {0};
    scene s = {0};
    rl_pending pending = {0};
    rl_cancel cancel = {0};
    static notified n;
    atomic_store(&n.calls, 0);
    if (!scene_start(&s, "pending-cancel-token", &err)) goto done;
    TRY(rl_cancel_new(&cancel, &err), &err);
    if (!start_pending(&s, RL_WAIT_FOREVER, cancel, &n, &pending, &err)) goto done;
    TRY(rl_cancel_trigger(cancel, &err), &err);
    expect_end(pending, RL_CANCELLED, 5000, &n, &err);
    CHECK(eventually(no_waiting_writers, &s.lock, 2000));
done:
    rl_pending_free(&pending, NULL);
    rl_cancel_free(&cancel, NULL);
    scene_end(&s);
    rl_error_free(&err);
}

static void freeing_or_cancelling_a_pending_acquire_gives_it_up(void) {
    rl_error err = {0};
    scene s = {0};
    rl_pending first = {0}, second = {0};
    static notified n1, n2;
    atomic_store(&n1.calls, 0);
    atomic_store(&n2.calls, 0);
    bool done_flag = false, held = false;
    if (!scene_start(&s, "pending-give-up", &err)) goto done;
    if (!start_pending(&s, RL_WAIT_FOREVER, (rl_cancel){0}, &n1, &first, &err)) goto done;
    CHECK_OK(rl_pending_free(&first, &err), &err);
    CHECK(eventually(called, &n1, 2000)); /* the callback still runs, once */
    CHECK(eventually(no_waiting_writers, &s.lock, 2000));

    if (!start_pending(&s, RL_WAIT_FOREVER, (rl_cancel){0}, &n2, &second, &err)) goto done;
    CHECK_OK(rl_pending_cancel(second, &err), &err);
    CHECK(eventually(called, &n2, 2000));
    /* Given up: asking for the outcome now says so. */
    CHECK_STATUS(RL_CANCELLED, rl_pending_wait(second, 0, &done_flag, NULL, NULL, &err), &err);
    CHECK(eventually(no_waiting_writers, &s.lock, 2000));
    CHECK_OK(rl_lock_is_held_by(s.lock, s.holder, &held, &err), &err);
    CHECK(held);
    sleep_ms(50);
    CHECK(atomic_load(&n1.calls) == 1 && atomic_load(&n2.calls) == 1);
done:
    rl_pending_free(&first, NULL);
    rl_pending_free(&second, NULL);
    scene_end(&s);
    rl_error_free(&err);
}

static void closing_the_client_ends_a_pending_acquire(void) {
    rl_error err = {0};
    scene s = {0};
    rl_pending pending = {0};
    static notified n;
    atomic_store(&n.calls, 0);
    if (!scene_start(&s, "pending-close", &err)) goto done;
    if (!start_pending(&s, RL_WAIT_FOREVER, (rl_cancel){0}, &n, &pending, &err)) goto done;
    int64_t closed_at = now_ms();
    CHECK_OK(rl_client_close(s.client, &err), &err);
    expect_end(pending, RL_CLOSED, 5000, &n, &err);
    CHECK(now_ms() - closed_at < 1000);
done:
    rl_pending_free(&pending, NULL);
    scene_end(&s);
    rl_error_free(&err);
}

static void pending_calls_refuse_bad_arguments_and_handles(void) {
    rl_error err = {0};
    scene s = {0};
    rl_pending pending = {0}, copy = {0};
    bool done_flag = false, locked = true;
    rl_lock wrong_kind = {0};
    static notified n;
    atomic_store(&n.calls, 0);
    if (!scene_start(&s, "pending-bad", &err)) goto done;
    TRY(rl_lock_release(s.lock, s.holder, NULL, &err), &err);
    /* Without somewhere to put a pending handle, nothing is attempted. */
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_lock_acquire_start(s.lock, s.waiter, 1000, 1000, (rl_cancel){0}, NULL, 0,
                                       NULL, NULL, NULL, NULL, NULL, &err),
                 &err);
    CHECK(strstr(err.message, "out_pending") != NULL);
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_lock_acquire_start(s.lock, s.waiter, 1000, 1000, (rl_cancel){0}, NULL, -1,
                                       NULL, NULL, NULL, NULL, &pending, &err),
                 &err);
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_lock_acquire_start(s.lock, s.waiter, -7, 1000, (rl_cancel){0}, NULL, 0, NULL,
                                       NULL, NULL, NULL, &pending, &err),
                 &err);
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_lock_acquire_start(s.lock, s.waiter, 1000, 0, (rl_cancel){0}, NULL, 0, NULL,
                                       NULL, NULL, NULL, &pending, &err),
                 &err);
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_lock_acquire_start(s.lock, s.waiter, 1000, 1000, (rl_cancel){0}, "", 0, NULL,
                                       NULL, NULL, NULL, &pending, &err),
                 &err);
    CHECK_STATUS(RL_INVALID_HANDLE,
                 rl_lock_acquire_start(s.lock, (rl_owner){0}, 1000, 1000, (rl_cancel){0}, NULL, 0,
                                       NULL, NULL, NULL, NULL, &pending, &err),
                 &err);
    CHECK_STATUS(RL_INVALID_HANDLE,
                 rl_lock_acquire_start(s.lock, s.waiter, 1000, 1000, (rl_cancel){.id = 99}, NULL,
                                       0, NULL, NULL, NULL, NULL, &pending, &err),
                 &err);
    CHECK(pending.id == 0);
    CHECK_OK(rl_lock_is_locked(s.lock, &locked, &err), &err);
    CHECK(!locked);

    /* Zero, random, wrong-kind and freed handles. */
    CHECK_STATUS(RL_INVALID_HANDLE, rl_pending_wait((rl_pending){0}, 0, &done_flag, NULL, NULL, &err),
                 &err);
    CHECK_STATUS(RL_INVALID_HANDLE,
                 rl_pending_wait((rl_pending){.id = 12345}, 0, &done_flag, NULL, NULL, &err), &err);
    wrong_kind = s.lock;
    CHECK_STATUS(RL_INVALID_HANDLE,
                 rl_pending_cancel((rl_pending){.id = wrong_kind.id}, &err), &err);
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_pending_free(NULL, &err), &err);
    CHECK_OK(rl_pending_free(&pending, &err), &err); /* zero: a no-op */

    TRY(rl_lock_acquire(s.lock, s.holder, 0, 10000, NULL, &err), &err);
    if (!start_pending(&s, RL_WAIT_FOREVER, (rl_cancel){0}, &n, &pending, &err)) goto done;
    CHECK_STATUS(RL_INVALID_ARGUMENT,
                 rl_pending_wait(pending, -5, &done_flag, NULL, NULL, &err), &err);
    copy = pending;
    CHECK_OK(rl_pending_free(&pending, &err), &err);
    CHECK_OK(rl_pending_free(&pending, &err), &err); /* zeroed: a second free is a no-op */
    CHECK_STATUS(RL_INVALID_HANDLE, rl_pending_free(&copy, &err), &err);
    CHECK_STATUS(RL_INVALID_HANDLE, rl_pending_cancel(copy, &err), &err);
    CHECK(eventually(called, &n, 2000));
done:
    rl_pending_free(&pending, NULL);
    scene_end(&s);
    rl_error_free(&err);
}

enum { WAITERS = 20 };

static void many_pending_acquires_from_one_thread_each_get_the_lock_in_turn(void) {
    rl_error err = {0};
    scene s = {0};
    rl_owner owners[WAITERS] = {{0}};
    rl_pending pendings[WAITERS] = {{0}};
    static notified n[WAITERS];
    for (int i = 0; i < WAITERS; i++) atomic_store(&n[i].calls, 0);
    rl_acquired acquired = {0};
    uint64_t last_token = 0;
    bool done_flag = false;
    if (!scene_start(&s, "pending-many", &err)) goto done;
    for (int i = 0; i < WAITERS; i++) {
        TRY(rl_owner_random(&owners[i], &err), &err);
        TRY(rl_lock_acquire_start(s.lock, owners[i], 60000, 10000, (rl_cancel){0}, NULL, 0,
                                  on_done, &n[i], NULL, NULL, &pendings[i], &err),
            &err);
        REQUIRE(pendings[i].id != 0);
    }
    TRY(rl_lock_release(s.lock, s.holder, NULL, &err), &err);
    for (int i = 0; i < WAITERS; i++) { /* in their order of arrival */
        TRY(rl_pending_wait(pendings[i], 10000, &done_flag, &acquired, NULL, &err), &err);
        CHECK(done_flag);
        CHECK(acquired.fencing_token > last_token);
        last_token = acquired.fencing_token;
        CHECK_OK(rl_lock_release(s.lock, owners[i], NULL, &err), &err);
    }
    for (int i = 0; i < WAITERS; i++) CHECK(eventually(called, &n[i], 2000));
done:
    for (int i = 0; i < WAITERS; i++) {
        rl_pending_free(&pendings[i], NULL);
        rl_owner_free(&owners[i], NULL);
    }
    scene_end(&s);
    rl_error_free(&err);
}

const test_case pending_tests[] = {
    {"pending: a free lock is acquired at once, with nothing pending",
     a_free_lock_is_acquired_at_once_with_nothing_pending},
    {"pending: an acquire calls back once and hands out its hold once",
     a_pending_acquire_calls_back_once_and_hands_out_its_hold_once},
    {"pending: an acquire ends by its own timeout", a_pending_acquire_ends_by_its_own_timeout},
    {"pending: a cancel token ends it and leaves nothing in Redis",
     a_cancel_token_ends_a_pending_acquire_and_leaves_nothing},
    {"pending: rl_pending_free and rl_pending_cancel give it up",
     freeing_or_cancelling_a_pending_acquire_gives_it_up},
    {"pending: closing the client ends it", closing_the_client_ends_a_pending_acquire},
    {"pending: bad arguments and handles are refused",
     pending_calls_refuse_bad_arguments_and_handles},
    {"pending: many acquires from one thread each get the lock in turn",
     many_pending_acquires_from_one_thread_each_get_the_lock_in_turn},
    {NULL, NULL},
};
