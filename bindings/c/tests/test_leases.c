/* Leases, the watchdog, loss and the alerts: a hold without a lease lives until released, a
 * lease ends a hold, a renewal that finds the hold gone reports it lost (callback, hold, release),
 * and a long wait raises a contention alert naming the holders. */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <string.h>

#include "harness.h"

/* A client whose watchdog renews every 100 ms (lease 300 ms), with both callbacks counted. */
typedef struct watched {
    rl_client client;
    atomic_int lost_events;
    atomic_int alerts;
    char lost_name[128];
    char alert_holders[1024];
} watched;

static void on_lost(void *user_data, const rl_lock_lost_event *event) {
    watched *w = user_data;
    snprintf(w->lost_name, sizeof w->lost_name, "%s", event->name);
    atomic_fetch_add(&w->lost_events, 1);
}

static void on_contention(void *user_data, const rl_contention_alert *alert) {
    watched *w = user_data;
    snprintf(w->alert_holders, sizeof w->alert_holders, "%s", alert->holders_json);
    atomic_fetch_add(&w->alerts, 1);
}

static bool watched_connect(watched *w, rl_error *err) {
    memset(w, 0, sizeof *w);
    rl_options options = {0};
    bool ok = CHECK_OK(rl_options_new(&options, err), err) &&
              CHECK_OK(rl_options_set_lease_ms(options, 300, err), err) &&
              CHECK_OK(rl_options_set_contention_alert(options, 150, -1, err), err) &&
              CHECK_OK(rl_options_set_on_lock_lost(options, on_lost, w, err), err) &&
              CHECK_OK(rl_options_set_on_contention(options, on_contention, w, err), err) &&
              CHECK_OK(rl_client_connect(redis_url(), options, &w->client, err), err);
    rl_options_free(&options, NULL);
    return ok;
}

static void the_watchdog_keeps_a_hold_without_lease(void) {
    rl_error err = {0};
    watched w;
    rl_lock lock = {0};
    rl_owner owner = {0}, other = {0};
    if (!watched_connect(&w, &err)) goto done;
    TRY(rl_client_lock(w.client, unique_name("watchdog"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_owner_random(&other, &err), &err);
    CHECK_OK(rl_lock_acquire(lock, owner, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    sleep_ms(1000); /* more than three leases */
    bool held = false;
    CHECK_OK(rl_lock_is_held_by(lock, owner, &held, &err), &err);
    CHECK(held);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(lock, other, 0, 5000, NULL, &err), &err);
    CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK(atomic_load(&w.lost_events) == 0);
done:
    rl_owner_free(&owner, NULL);
    rl_owner_free(&other, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&w.client, NULL);
    rl_error_free(&err);
}

static void a_lease_ends_the_hold_and_extend_moves_it(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0}, other = {0};
    TRY(rl_client_lock(client, unique_name("lease"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_owner_random(&other, &err), &err);

    CHECK_OK(rl_lock_acquire(lock, owner, 0, 200, NULL, &err), &err);
    CHECK_OK(rl_lock_extend(lock, owner, 1500, &err), &err);
    sleep_ms(400); /* past the first lease, within the extended one */
    bool held = false;
    CHECK_OK(rl_lock_is_held_by(lock, owner, &held, &err), &err);
    CHECK(held);
    CHECK_OK(rl_lock_extend(lock, owner, 100, &err), &err);
    sleep_ms(300);
    CHECK_OK(rl_lock_is_held_by(lock, owner, &held, &err), &err);
    CHECK(!held);
    /* Expired: someone else takes it at once, and the late release changes nothing. */
    CHECK_OK(rl_lock_acquire(lock, other, 0, 5000, NULL, &err), &err);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK_OK(rl_lock_release(lock, other, NULL, &err), &err);
done:
    rl_owner_free(&owner, NULL);
    rl_owner_free(&other, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static bool lost_reported(void *arg) { return atomic_load(&((watched *)arg)->lost_events) > 0; }

static void a_hold_removed_behind_the_watchdog_is_reported_lost(void) {
    rl_error err = {0};
    watched w;
    rl_client admin = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_hold hold = {0};
    const char *name = unique_name("lost");
    if (!watched_connect(&w, &err)) goto done;
    TRY(rl_client_lock(w.client, name, &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, "c-test",
                                  NULL, &hold, &err),
               &err);
    bool lost = true, watched = false;
    CHECK_OK(rl_hold_wait_lost(hold, 50, (rl_cancel){0}, &lost, &err), &err);
    CHECK(!lost); /* not lost yet: the wait timed out */
    CHECK_OK(rl_hold_is_watched(hold, &watched, &err), &err);
    CHECK(watched);

    bool was_held = false;
    CHECK_OK(rl_client_force_unlock(admin, name, &was_held, &err), &err); /* another client */
    CHECK(was_held);
    CHECK_OK(rl_hold_wait_lost(hold, 3000, (rl_cancel){0}, &lost, &err), &err);
    CHECK(lost);
    CHECK_OK(rl_hold_is_lost(hold, &lost, &err), &err);
    CHECK(lost);
    CHECK_OK(rl_hold_is_watched(hold, &watched, &err), &err);
    CHECK(!watched);
    CHECK(eventually(lost_reported, &w, 3000));
    CHECK(strcmp(w.lost_name, name) == 0);
    /* The watchdog noticed first; the release still says lost, and a second one not held. */
    CHECK_STATUS(RL_LOCK_LOST, rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(lock, owner, NULL, &err), &err);
done:
    rl_hold_free(&hold, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&w.client, NULL);
    rl_client_free(&admin, NULL);
    rl_error_free(&err);
}

static void a_release_that_finds_a_watched_hold_gone_is_lock_lost(void) {
    rl_error err = {0};
    rl_client client = connect_default(); /* lease 30 s: the watchdog will not have noticed */
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_hold hold = {0};
    bool lost = false;
    TRY(rl_client_lock(client, unique_name("lost-at-release"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL, &hold,
                           &err),
        &err);
    const char *del[] = {"EVAL", "for _, k in ipairs(redis.call('KEYS', '*')) do "
                                 "if not string.find(k, ':fence:', 1, true) then "
                                 "redis.call('DEL', k) end end return 0", "0"};
    char reply[64];
    CHECK(redis_command(reply, sizeof reply, 3, del)); /* the hold vanishes, as after a failover */
    CHECK_STATUS(RL_LOCK_LOST, rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK_OK(rl_hold_is_lost(hold, &lost, &err), &err);
    CHECK(lost);
done:
    rl_hold_free(&hold, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void a_fixed_lease_hold_is_not_watched(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_hold hold = {0};
    TRY(rl_client_lock(client, unique_name("unwatched"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, 5000, (rl_cancel){0}, NULL, NULL, &hold, &err),
               &err);
    bool lost = true;
    /* Waiting for the loss of a hold nothing watches would never end: refused at once. */
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_hold_wait_lost(hold, RL_WAIT_FOREVER, (rl_cancel){0},
                                                        &lost, &err),
                 &err);
    CHECK_OK(rl_hold_is_lost(hold, &lost, &err), &err);
    CHECK(!lost);
    bool watched = true;
    CHECK_OK(rl_hold_is_watched(hold, &watched, &err), &err);
    CHECK(!watched);
    CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
done:
    rl_hold_free(&hold, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static bool is_watched(rl_hold hold) {
    bool watched = false;
    rl_error err = {0};
    CHECK_OK(rl_hold_is_watched(hold, &watched, &err), &err);
    rl_error_free(&err);
    return watched;
}

static void a_hold_is_watched_until_its_last_release_or_close(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_hold first = {0}, again = {0}, next = {0};
    uint32_t left = 9;
    bool lost = true;
    TRY(rl_client_lock(client, unique_name("watched"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL, &first,
                           &err),
        &err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL, &again,
                           &err),
        &err);
    CHECK(is_watched(first) && is_watched(again));
    CHECK_OK(rl_lock_release(lock, owner, &left, &err), &err);
    CHECK(left == 1);
    CHECK(is_watched(first)); /* one hold in Redis, counted twice: still kept */
    CHECK_OK(rl_lock_release(lock, owner, &left, &err), &err);
    CHECK(left == 0);
    CHECK(!is_watched(first) && !is_watched(again));
    CHECK_OK(rl_hold_is_lost(first, &lost, &err), &err);
    CHECK(!lost); /* released, not lost */
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL, &next,
                           &err),
        &err);
    CHECK(is_watched(next));
    CHECK_OK(rl_client_close(client, &err), &err);
    CHECK(!is_watched(next)); /* nothing renews it any more */
done:
    rl_hold_free(&first, NULL);
    rl_hold_free(&again, NULL);
    rl_hold_free(&next, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static bool alert_raised(void *arg) { return atomic_load(&((watched *)arg)->alerts) > 0; }

static void a_long_wait_raises_a_contention_alert_naming_the_holder(void) {
    rl_error err = {0};
    watched w;
    rl_lock lock = {0};
    rl_owner holder = {0}, waiter = {0};
    char *holder_token = NULL;
    if (!watched_connect(&w, &err)) goto done;
    TRY(rl_client_lock(w.client, unique_name("contention"), &lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&waiter, &err), &err);
    TRY(rl_owner_token(holder, &holder_token, &err), &err);
    CHECK_OK(rl_lock_acquire(lock, holder, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(lock, waiter, 600, RL_LEASE_WATCHDOG, NULL, &err),
                 &err);
    CHECK(eventually(alert_raised, &w, 3000));
    CHECK(strstr(w.alert_holders, holder_token) != NULL);
    CHECK_OK(rl_lock_release(lock, holder, NULL, &err), &err);
done:
    rl_string_free(holder_token);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&w.client, NULL);
    rl_error_free(&err);
}

/* A release of one particular hold (rl_lock_release_fenced) leaves the owner's newer hold, taken
 * after the old one's lease ran out (by another thread sharing the owner), alone. */
static void a_fenced_release_of_an_ended_hold_leaves_the_newer_one(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    TRY(rl_client_lock(client, unique_name("fenced"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    rl_acquired old = {0}, renewed = {0};
    CHECK_OK(rl_lock_acquire(lock, owner, 0, 100, &old, &err), &err);
    sleep_ms(250);
    CHECK_OK(rl_lock_acquire(lock, owner, 0, 30000, &renewed, &err), &err);
    CHECK(renewed.fencing_token > old.fencing_token && renewed.hold_count == 1);
    uint32_t remaining = 99;
    CHECK_STATUS(RL_NOT_HELD,
                 rl_lock_release_fenced(lock, owner, old.fencing_token, &remaining, &err), &err);
    CHECK(remaining == 0);
    bool held = false;
    CHECK_OK(rl_lock_is_held_by(lock, owner, &held, &err), &err);
    CHECK(held);
    CHECK_OK(rl_lock_release_fenced(lock, owner, renewed.fencing_token, &remaining, &err), &err);
    CHECK(remaining == 0);
    /* Stale handles are refused as for every call; NULL outputs are allowed. */
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release_fenced(lock, owner, 0, NULL, NULL), NULL);
    rl_lock stale = lock;
    rl_lock_free(&lock, NULL);
    CHECK_STATUS(RL_INVALID_HANDLE, rl_lock_release_fenced(stale, owner, 1, NULL, &err), &err);
done:
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

const test_case lease_tests[] = {
    {"leases: the watchdog keeps a hold without a lease", the_watchdog_keeps_a_hold_without_lease},
    {"leases: a lease ends the hold and extend moves it", a_lease_ends_the_hold_and_extend_moves_it},
    {"leases: a hold removed behind the watchdog is reported lost (hold, callback, release)",
     a_hold_removed_behind_the_watchdog_is_reported_lost},
    {"leases: a release that finds a watched hold gone is RL_LOCK_LOST",
     a_release_that_finds_a_watched_hold_gone_is_lock_lost},
    {"leases: a fixed-lease hold is not watched", a_fixed_lease_hold_is_not_watched},
    {"leases: a fenced release of an ended hold leaves the owner's newer hold",
     a_fenced_release_of_an_ended_hold_leaves_the_newer_one},
    {"leases: a hold is watched until its last release or close",
     a_hold_is_watched_until_its_last_release_or_close},
    {"leases: a long wait raises a contention alert naming the holder",
     a_long_wait_raises_a_contention_alert_naming_the_holder},
    {NULL, NULL},
};
