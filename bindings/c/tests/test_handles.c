/* Checked handles and library strings: zero, freed, double-freed, foreign and wrong-kind handles,
 * use after close, and strings freed twice are status codes, never a crash; loops leak nothing. */
#include <string.h>

#include "harness.h"

#define CHECK_HANDLE_REJECTED(call, err, word)                              \
    do {                                                                    \
        if (CHECK_STATUS(RL_INVALID_HANDLE, call, err)) {                   \
            CHECK((err)->message && strstr((err)->message, word));          \
        }                                                                   \
    } while (0)

static void zero_freed_foreign_and_wrong_kind_handles_are_rejected(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0}, copy = {0};
    rl_owner owner = {0};
    bool locked = false;
    TRY(rl_owner_random(&owner, &err), &err);
    CHECK_HANDLE_REJECTED(rl_lock_is_locked((rl_lock){0}, &locked, &err), &err, "is 0");
    CHECK_HANDLE_REJECTED(rl_lock_is_locked((rl_lock){0x1234}, &locked, &err), &err,
                          "not a libredlock handle");
    CHECK_HANDLE_REJECTED(rl_lock_is_locked((rl_lock){owner.id}, &locked, &err), &err,
                          "is an rl_owner handle, but an rl_lock handle was expected");
    CHECK_HANDLE_REJECTED(rl_client_lock((rl_client){owner.id}, "x", &lock, &err), &err,
                          "rl_client");
    CHECK_HANDLE_REJECTED(rl_hold_is_watched((rl_hold){0}, &locked, &err), &err, "is 0");
    CHECK_HANDLE_REJECTED(rl_hold_is_watched((rl_hold){owner.id}, &locked, &err), &err,
                          "rl_hold");

    TRY(rl_client_lock(client, unique_name("handles"), &lock, &err), &err);
    copy = lock;
    CHECK_OK(rl_lock_free(&lock, &err), &err);
    CHECK(lock.id == 0); /* the freed variable is zeroed */
    CHECK_OK(rl_lock_free(&lock, &err), &err); /* freeing a zero handle: no-op, like free(NULL) */
    CHECK_HANDLE_REJECTED(rl_lock_is_locked(copy, &locked, &err), &err, "already freed");
    CHECK_HANDLE_REJECTED(rl_lock_free(&copy, &err), &err, "already freed"); /* double free */
    CHECK_HANDLE_REJECTED(rl_lock_acquire(copy, owner, 0, 1000, NULL, &err), &err,
                          "already freed");
    rl_owner stale = owner;
    CHECK_OK(rl_owner_free(&owner, &err), &err);
    CHECK_HANDLE_REJECTED(rl_owner_free(&stale, &err), &err, "already freed");
    CHECK_HANDLE_REJECTED(rl_owner_token(stale, &(char *){NULL}, &err), &err, "already freed");
done:
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void a_closed_client_and_its_locks_answer_closed(void) {
    rl_error err = {0};
    rl_client client = connect_default(), copy = {0};
    rl_lock lock = {0};
    rl_owner owner = {0};
    bool closed = false;
    TRY(rl_client_lock(client, unique_name("closed"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    CHECK_OK(rl_client_close(client, &err), &err);
    CHECK_OK(rl_client_close(client, &err), &err); /* twice: harmless */
    CHECK_OK(rl_client_is_closed(client, &closed, &err), &err);
    CHECK(closed);
    CHECK_STATUS(RL_CLOSED, rl_client_lock(client, "after-close", &(rl_lock){0}, &err), &err);
    CHECK_STATUS(RL_CLOSED, rl_lock_acquire(lock, owner, 0, RL_LEASE_WATCHDOG, NULL, &err), &err);
    CHECK(err.message && strstr(err.message, "closed"));
    CHECK_STATUS(RL_CLOSED, rl_lock_release(lock, owner, NULL, &err), &err);
    CHECK_STATUS(RL_CLOSED, rl_lock_release_fenced(lock, owner, 1, NULL, &err), &err);
    CHECK_STATUS(RL_CLOSED, rl_client_inspect(client, "x", &(char *){NULL}, &err), &err);

    copy = client;
    CHECK_OK(rl_client_free(&client, &err), &err);
    CHECK_STATUS(RL_INVALID_HANDLE, rl_client_close(copy, &err), &err); /* freed */
    CHECK_STATUS(RL_INVALID_HANDLE, rl_client_free(&copy, &err), &err); /* double free */
    /* The lock handle outlives its client as a handle, and keeps answering RL_CLOSED. */
    CHECK_STATUS(RL_CLOSED, rl_lock_is_locked(lock, &closed, &err), &err);
done:
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void library_strings_are_freed_once_and_only_theirs(void) {
    rl_error err = {0};
    rl_owner owner = {0};
    char *token = NULL;
    char mine[] = "not from the library";
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_owner_token(owner, &token, &err), &err);
    CHECK_OK(rl_string_free(token), NULL);
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_string_free(token), NULL); /* double free: refused */
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_string_free(mine), NULL);  /* never passed to free() */
    /* One rl_error reused across failing calls holds one message at a time. */
    uint64_t strings_before = 0, strings_after = 0;
    CHECK_OK(rl_live_objects(NULL, &strings_before, NULL), NULL);
    for (int i = 0; i < 100; i++) {
        CHECK_STATUS(RL_INVALID_ARGUMENT, rl_owner_from_token("", &(rl_owner){0}, &err), &err);
    }
    CHECK_OK(rl_live_objects(NULL, &strings_after, NULL), NULL);
    CHECK(strings_after <= strings_before + 1);
    rl_owner_free(&owner, NULL);
    CHECK_OK(rl_owner_random(&owner, &err), &err); /* success resets the error... */
    CHECK(err.code == RL_OK && err.message == NULL);
    CHECK_OK(rl_error_free(&err), NULL); /* ...and freeing twice is harmless */
    CHECK_OK(rl_error_free(&err), NULL);
done:
    rl_owner_free(&owner, NULL);
    rl_error_free(&err);
}

/* An rl_error's message belongs to its rl_error: rl_string_free refuses it. (Before, it freed it,
 * the allocator gave the memory to the caller's next string, and the next call reporting into
 * the rl_error freed that string.) A failed getter leaves no stale value in its out-parameter. */
static void an_errors_message_is_the_errors_and_failed_getters_reset_their_out(void) {
    rl_error err = {0};
    bool flag = false;
    CHECK_STATUS(RL_INVALID_HANDLE, rl_lock_is_locked((rl_lock){0}, &flag, &err), &err);
    REQUIRE(err.message != NULL);
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_string_free(err.message), NULL);
    CHECK(err.message != NULL && strstr(err.message, "rl_lock handle") != NULL);
    CHECK_OK(rl_error_free(&err), NULL);
    rl_mode mode = (rl_mode)12345;
    CHECK_STATUS(RL_INVALID_HANDLE, rl_lock_mode((rl_lock){0}, &mode, &err), &err);
    CHECK((int)mode == 0);
    rl_error_free(&err);
}

static void loops_of_acquire_and_release_leak_no_handles(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    uint64_t handles_before = 0, strings_before = 0, handles_after = 0, strings_after = 0;
    TRY(rl_live_objects(&handles_before, &strings_before, &err), &err);
    for (int i = 0; i < 200; i++) {
        rl_lock lock = {0};
        rl_rwlock rw = {0};
        rl_owner owner = {0};
        rl_hold hold = {0};
        rl_cancel cancel = {0};
        char *token = NULL, *json = NULL;
        CHECK_OK(rl_client_lock(client, unique_name("loop"), &lock, &err), &err);
        CHECK_OK(rl_client_read_write_lock(client, "c-test:loop-rw", &rw, &err), &err);
        CHECK_OK(rl_owner_random(&owner, &err), &err);
        CHECK_OK(rl_cancel_new(&cancel, &err), &err);
        CHECK_OK(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, cancel, NULL, NULL, &hold,
                                    &err),
                 &err);
        CHECK_OK(rl_owner_token(owner, &token, &err), &err);
        CHECK_OK(rl_lock_inspect(lock, &json, &err), &err);
        CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
        CHECK_STATUS(RL_NOT_HELD, rl_lock_release(lock, owner, NULL, &err), &err);
        rl_string_free(token);
        rl_string_free(json);
        rl_hold_free(&hold, NULL);
        rl_cancel_free(&cancel, NULL);
        rl_owner_free(&owner, NULL);
        rl_rwlock_free(&rw, NULL);
        rl_lock_free(&lock, NULL);
    }
    rl_error_free(&err);
    TRY(rl_live_objects(&handles_after, &strings_after, &err), &err);
    CHECK(handles_after == handles_before);
    CHECK(strings_after == strings_before);
    CHECK(redis_key_count("c-test:loop") == 0);
done:
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

const test_case handle_tests[] = {
    {"handles: zero, freed, foreign and wrong-kind handles are RL_INVALID_HANDLE",
     zero_freed_foreign_and_wrong_kind_handles_are_rejected},
    {"handles: a closed client and its locks answer RL_CLOSED",
     a_closed_client_and_its_locks_answer_closed},
    {"handles: library strings are freed once, and only theirs",
     library_strings_are_freed_once_and_only_theirs},
    {"handles: an rl_error's message is its own; failed getters reset their out-parameter",
     an_errors_message_is_the_errors_and_failed_getters_reset_their_out},
    {"handles: loops of acquire and release leak no handles or strings",
     loops_of_acquire_and_release_leak_no_handles},
    {NULL, NULL},
};
