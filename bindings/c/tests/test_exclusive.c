/* The exclusive reentrant lock: the contract's rules 1 (ownership, reentrancy, release) and the
 * fencing token, and seed 000's "lock and unlock by different instances" through the token. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void reentrant_acquire_needs_as_many_releases(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0}, other = {0};
    REQUIRE_OK(rl_client_lock(client, unique_name("reentrant"), &lock, &err), &err);
    REQUIRE_OK(rl_owner_random(&owner, &err), &err);
    REQUIRE_OK(rl_owner_random(&other, &err), &err);

    rl_acquired first = {0}, second = {0};
    CHECK_OK(rl_lock_acquire(lock, owner, 0, RL_LEASE_WATCHDOG, &first, &err), &err);
    CHECK_OK(rl_lock_acquire(lock, owner, 0, RL_LEASE_WATCHDOG, &second, &err), &err);
    CHECK(first.hold_count == 1 && second.hold_count == 2);
    CHECK(second.fencing_token == first.fencing_token); /* a re-entry keeps the token */
    uint32_t count = 0;
    CHECK_OK(rl_lock_hold_count(lock, owner, &count, &err), &err);
    CHECK(count == 2);
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(lock, other, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);

    uint32_t remaining = 99;
    CHECK_OK(rl_lock_release(lock, owner, &remaining, &err), &err);
    CHECK(remaining == 1);
    bool locked = false;
    CHECK_OK(rl_lock_is_locked(lock, &locked, &err), &err);
    CHECK(locked);
    CHECK_OK(rl_lock_release(lock, owner, &remaining, &err), &err);
    CHECK(remaining == 0);
    CHECK_OK(rl_lock_is_locked(lock, &locked, &err), &err);
    CHECK(!locked);
    CHECK_OK(rl_lock_acquire(lock, other, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    CHECK_OK(rl_lock_release(lock, other, NULL, &err), &err);

    rl_owner_free(&owner, NULL);
    rl_owner_free(&other, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void release_by_non_owner_or_twice_is_not_held_and_changes_nothing(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0}, stranger = {0};
    const char *name = unique_name("not-held");
    REQUIRE_OK(rl_client_lock(client, name, &lock, &err), &err);
    REQUIRE_OK(rl_owner_random(&owner, &err), &err);
    REQUIRE_OK(rl_owner_random(&stranger, &err), &err);

    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(lock, owner, NULL, &err), &err); /* never held */
    CHECK(err.code == RL_NOT_HELD && err.message && strstr(err.message, "not held"));
    CHECK_OK(rl_lock_acquire(lock, owner, 0, 10000, NULL, &err), &err);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(lock, stranger, NULL, &err), &err);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_extend(lock, stranger, 5000, &err), &err);
    bool held = false;
    CHECK_OK(rl_lock_is_held_by(lock, owner, &held, &err), &err);
    CHECK(held); /* the stranger's release changed nothing */
    CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(lock, owner, NULL, &err), &err); /* double */
    CHECK(redis_key_count(name) == 0);

    rl_owner_free(&owner, NULL);
    rl_owner_free(&stranger, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

/* Seed 000: the lock is taken by one instance and released by another that got the token. */
static void another_instance_releases_with_the_token(void) {
    rl_error err = {0};
    rl_client taker = connect_default(), releaser = connect_default();
    const char *name = unique_name("token-handover");
    rl_lock taker_lock = {0}, releaser_lock = {0};
    rl_owner owner = {0}, same = {0};
    REQUIRE_OK(rl_client_lock(taker, name, &taker_lock, &err), &err);
    REQUIRE_OK(rl_client_lock(releaser, name, &releaser_lock, &err), &err);
    REQUIRE_OK(rl_owner_random(&owner, &err), &err);
    /* A fixed lease: with the watchdog, the taker's client would report the hold lost once the
     * other instance released it (its renewal finds the hold gone). */
    CHECK_OK(rl_lock_acquire(taker_lock, owner, 0, 30000, NULL, &err), &err);

    char *token = NULL;
    REQUIRE_OK(rl_owner_token(owner, &token, &err), &err);
    CHECK(strlen(token) >= 36); /* a UUID and more */
    REQUIRE_OK(rl_owner_from_token(token, &same, &err), &err);
    bool held = false;
    CHECK_OK(rl_lock_is_held_by(releaser_lock, same, &held, &err), &err);
    CHECK(held);
    CHECK_OK(rl_lock_extend(releaser_lock, same, 20000, &err), &err);
    CHECK_OK(rl_lock_release(releaser_lock, same, NULL, &err), &err);
    bool locked = true;
    CHECK_OK(rl_lock_is_locked(taker_lock, &locked, &err), &err);
    CHECK(!locked);
    CHECK_STATUS(RL_NOT_HELD, rl_lock_release(taker_lock, owner, NULL, &err), &err);

    rl_string_free(token);
    rl_owner_free(&owner, NULL);
    rl_owner_free(&same, NULL);
    rl_lock_free(&taker_lock, NULL);
    rl_lock_free(&releaser_lock, NULL);
    rl_client_free(&taker, NULL);
    rl_client_free(&releaser, NULL);
    rl_error_free(&err);
}

static void fencing_tokens_strictly_increase(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    REQUIRE_OK(rl_client_lock(client, unique_name("fencing"), &lock, &err), &err);
    uint64_t last = 0;
    for (int i = 0; i < 5; i++) {
        rl_owner owner = {0};
        rl_acquired acquired = {0};
        REQUIRE_OK(rl_owner_random(&owner, &err), &err);
        CHECK_OK(rl_lock_acquire(lock, owner, 0, 5000, &acquired, &err), &err);
        CHECK(acquired.fencing_token > last);
        last = acquired.fencing_token;
        CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
        rl_owner_free(&owner, NULL);
    }
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

/* Fences stop at 2^53 - 1, the last that Redis' Lua counts exactly: the token crosses the ABI
 * exactly, and after it an acquire is RL_REDIS (FENCESPENT) instead of a repeated token. The
 * client has a key prefix of its own, so no other test shares the counter set here. */
static void fences_stop_at_two_to_the_53(void) {
    rl_error err = {0};
    rl_options options = {0};
    rl_client client = {0};
    rl_lock lock = {0};
    rl_owner owner = {0};
    REQUIRE_OK(rl_options_new(&options, &err), &err);
    TRY(rl_options_set_prefix(options, "c-spent-fences", &err), &err);
    TRY(rl_client_connect(redis_url(), options, &client, &err), &err);
    TRY(rl_client_lock(client, "spent", &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    rl_acquired got = {0};
    TRY(rl_lock_acquire(lock, owner, 0, 10000, &got, &err), &err);
    TRY(rl_lock_release(lock, owner, NULL, &err), &err);
    const char *set[] = {"EVAL",
                         "local k = redis.call('KEYS', ARGV[1]) "
                         "redis.call('SET', k[1], ARGV[2]) return #k",
                         "0", "c-spent-fences:fence:*", "9007199254740990"}; /* 2^53 - 2 */
    char reply[64];
    CHECK(redis_command(reply, sizeof reply, 5, set) && strcmp(reply, ":1\r\n") == 0);

    CHECK_OK(rl_lock_acquire(lock, owner, 0, 10000, &got, &err), &err);
    CHECK(got.fencing_token == 9007199254740991ULL);
    CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK_STATUS(RL_REDIS, rl_lock_acquire(lock, owner, 0, 10000, &got, &err), &err);
    CHECK(err.message && strstr(err.message, "2^53"));
    bool locked = true;
    CHECK_OK(rl_lock_is_locked(lock, &locked, &err), &err);
    CHECK(!locked);
done:
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_options_free(&options, NULL);
    rl_error_free(&err);
}

static void a_wait_ends_with_timeout_after_about_wait_ms(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner holder = {0}, waiter = {0};
    REQUIRE_OK(rl_client_lock(client, unique_name("timeout"), &lock, &err), &err);
    REQUIRE_OK(rl_owner_random(&holder, &err), &err);
    REQUIRE_OK(rl_owner_random(&waiter, &err), &err);
    CHECK_OK(rl_lock_acquire(lock, holder, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    int64_t started = now_ms();
    CHECK_STATUS(RL_TIMEOUT, rl_lock_acquire(lock, waiter, 300, RL_LEASE_WATCHDOG, NULL, &err),
                 &err);
    int64_t waited = now_ms() - started;
    CHECK(waited >= 290 && waited < 3000);
    CHECK_OK(rl_lock_release(lock, holder, NULL, &err), &err);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void names_with_any_characters_are_distinct_locks(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    const char *names[] = {"c-test:{braces}", "c-test:%7Bbraces%7D", "c-test: spaces 🔒"};
    rl_lock locks[3] = {{0}};
    rl_owner owner = {0};
    REQUIRE_OK(rl_owner_random(&owner, &err), &err);
    for (int i = 0; i < 3; i++) {
        REQUIRE_OK(rl_client_lock(client, names[i], &locks[i], &err), &err);
        /* Every name is free although the others are held: no two share a key. */
        CHECK_OK(rl_lock_acquire(locks[i], owner, 0, 5000, NULL, &err), &err);
        char *name = NULL;
        CHECK_OK(rl_lock_name(locks[i], &name, &err), &err);
        CHECK(name && strcmp(name, names[i]) == 0);
        rl_string_free(name);
    }
    char *json = NULL;
    CHECK_OK(rl_client_inspect(client, names[2], &json, &err), &err);
    CHECK(json_has(json, "mode", "\"write\"") && json_has(json, "holder_count", "1"));
    rl_string_free(json);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(rl_lock_release(locks[i], owner, NULL, &err), &err);
        rl_lock_free(&locks[i], NULL);
    }
    rl_owner_free(&owner, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

const test_case exclusive_tests[] = {
    {"exclusive: reentrant acquire needs as many releases", reentrant_acquire_needs_as_many_releases},
    {"exclusive: release by a non-owner, or twice, is NOT_HELD and changes nothing",
     release_by_non_owner_or_twice_is_not_held_and_changes_nothing},
    {"exclusive: another instance releases with the token (seed 000)",
     another_instance_releases_with_the_token},
    {"exclusive: fencing tokens strictly increase", fencing_tokens_strictly_increase},
    {"exclusive: fences stop at 2^53 - 1 with RL_REDIS", fences_stop_at_two_to_the_53},
    {"exclusive: a wait ends with RL_TIMEOUT after about wait_ms",
     a_wait_ends_with_timeout_after_about_wait_ms},
    {"exclusive: names with any characters are distinct locks",
     names_with_any_characters_are_distinct_locks},
    {NULL, NULL},
};
