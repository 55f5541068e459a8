/* Bad input never crashes: NULL pointers, invalid UTF-8, over-long names and tokens, zero or
 * negative durations, bad URLs and unreachable servers are status codes with clear messages. */
#include <string.h>

#include "harness.h"

/* Checks the status and that the message mentions `word`. */
#define CHECK_REJECTED(expected, call, err, word)                           \
    do {                                                                    \
        if (CHECK_STATUS(expected, call, err)) {                            \
            CHECK((err)->message && strstr((err)->message, word));          \
        }                                                                   \
    } while (0)

static void null_pointers_are_invalid_arguments(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    TRY(rl_client_lock(client, unique_name("null"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);

    rl_client unused = {0};
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_connect(NULL, (rl_options){0}, &unused, &err),
                   &err, "url");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_connect(redis_url(), (rl_options){0}, NULL, &err),
                   &err, "out");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_lock(client, NULL, &lock, &err), &err, "name");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_lock(client, "x", NULL, &err), &err, "out");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_read_write_lock(client, NULL, NULL, &err), &err,
                   "out");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_owner_from_token(NULL, &owner, &err), &err, "token");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_owner_token(owner, NULL, &err), &err, "out");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_is_locked(lock, NULL, &err), &err, "out");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_inspect(lock, NULL, &err), &err, "out_json");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_inspect(client, NULL, NULL, &err), &err,
                   "out_json");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_free(NULL, &err), &err, "NULL");
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_error_free(NULL), NULL);
    CHECK_OK(rl_string_free(NULL), NULL); /* like free(NULL) */
    /* A NULL rl_error is allowed: only the status comes back. */
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_client_lock(client, NULL, &lock, NULL), NULL);
    /* The handle out-parameter of a failed call is zeroed, never left stale. */
    unused.id = 12345;
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_client_connect("nonsense", (rl_options){0}, &unused, &err),
                 &err);
    CHECK(unused.id == 0);
done:
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void names_must_be_1_to_1024_bytes_of_utf8(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    char name[RL_MAX_NAME_LEN + 2];

    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_lock(client, "", &lock, &err), &err, "empty");
    memset(name, 'n', RL_MAX_NAME_LEN + 1);
    name[RL_MAX_NAME_LEN + 1] = '\0'; /* 1025 bytes */
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_lock(client, name, &lock, &err), &err, "1025");
    CHECK_REJECTED(RL_INVALID_ARGUMENT,
                   rl_client_read_write_lock(client, name, &(rl_rwlock){0}, &err), &err, "1025");
    name[RL_MAX_NAME_LEN] = '\0'; /* exactly 1024: fine */
    CHECK_OK(rl_client_lock(client, name, &lock, &err), &err);
    rl_lock_free(&lock, NULL);

    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_lock(client, "bad \xff\xfe utf-8", &lock, &err),
                   &err, "UTF-8");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_inspect(client, "\xc3", &(char *){NULL}, &err),
                   &err, "UTF-8");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_force_unlock(client, "", NULL, &err), &err,
                   "empty");
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void tokens_must_be_1_to_512_bytes_of_utf8(void) {
    rl_error err = {0};
    rl_owner owner = {0};
    char token[RL_MAX_TOKEN_LEN + 2];
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_owner_from_token("", &owner, &err), &err, "empty");
    memset(token, 't', RL_MAX_TOKEN_LEN + 1);
    token[RL_MAX_TOKEN_LEN + 1] = '\0';
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_owner_from_token(token, &owner, &err), &err, "513");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_owner_from_token("\x80", &owner, &err), &err, "UTF-8");
    token[RL_MAX_TOKEN_LEN] = '\0';
    CHECK_OK(rl_owner_from_token(token, &owner, &err), &err);
    char *back = NULL;
    CHECK_OK(rl_owner_token(owner, &back, &err), &err);
    CHECK(back && strcmp(back, token) == 0);
    rl_string_free(back);
    rl_owner_free(&owner, NULL);
    rl_error_free(&err);
}

static void durations_must_be_positive_or_the_sentinel(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_options options = {0};
    rl_hold hold = {0};
    TRY(rl_client_lock(client, unique_name("durations"), &lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_options_new(&options, &err), &err);

    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_acquire(lock, owner, -2, 1000, NULL, &err), &err,
                   "wait_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_acquire(lock, owner, 0, 0, NULL, &err), &err,
                   "lease_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_acquire(lock, owner, 0, -7, NULL, &err), &err,
                   "lease_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_acquire(lock, owner, 0, INT64_MIN, NULL, &err),
                   &err, "lease_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_extend(lock, owner, 0, &err), &err, "lease_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_lock_extend(lock, owner, -1, &err), &err, "lease_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_options_set_lease_ms(options, 0, &err), &err,
                   "lease_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_options_set_command_timeout_ms(options, -1, &err),
                   &err, "timeout_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_options_set_connect_timeout_ms(options, 0, &err),
                   &err, "timeout_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_options_set_recheck_interval_ms(options, 0, &err),
                   &err, "interval_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_options_set_contention_alert(options, 0, -1, &err),
                   &err, "after_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_options_set_contention_alert(options, -1, 0, &err),
                   &err, "attempts");
    /* The core checks the rest of the settings when connecting. */
    CHECK_OK(rl_options_set_prefix(options, "bad{prefix}", &err), &err);
    rl_client refused = {0};
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_connect(redis_url(), options, &refused, &err),
                   &err, "prefix");
    CHECK_OK(rl_options_set_prefix(options, "fine", &err), &err);
    CHECK_OK(rl_options_set_recheck_interval_ms(options, INT64_MAX, &err), &err);
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_connect(redis_url(), options, &refused, &err),
                   &err, "recheck");
    /* A label must say something, in UTF-8; a long one is cut, not refused. */
    CHECK_REJECTED(RL_INVALID_ARGUMENT,
                   rl_lock_acquire_ex(lock, owner, 0, 10000, (rl_cancel){0}, "", NULL, NULL, &err),
                   &err, "label");
    CHECK_REJECTED(RL_INVALID_ARGUMENT,
                   rl_lock_acquire_ex(lock, owner, 0, 10000, (rl_cancel){0}, "\xff", NULL, NULL,
                                      &err),
                   &err, "label");
    /* Nothing was taken by the refused calls. */
    bool locked = true;
    CHECK_OK(rl_lock_is_locked(lock, &locked, &err), &err);
    CHECK(!locked);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL, &hold,
                           &err),
        &err);
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_hold_wait_lost(hold, -5, (rl_cancel){0}, NULL, &err),
                   &err, "timeout_ms");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_hold_is_watched(hold, NULL, &err), &err, "out");
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_hold_is_lost(hold, NULL, &err), &err, "out");
    CHECK_OK(rl_lock_release(lock, owner, NULL, &err), &err);
done:
    rl_hold_free(&hold, NULL);
    rl_options_free(&options, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

static void bad_urls_and_unreachable_servers_are_reported(void) {
    rl_error err = {0};
    rl_client client = {0};
    rl_options options = {0};
    CHECK_REJECTED(RL_INVALID_ARGUMENT, rl_client_connect("not a url", (rl_options){0}, &client,
                                                          &err),
                   &err, "URL");
    /* Nothing listens on port 1 of the loopback: refused at once. */
    TRY(rl_options_new(&options, &err), &err);
    TRY(rl_options_set_connect_timeout_ms(options, 2000, &err), &err);
    int64_t started = now_ms();
    CHECK_STATUS(RL_CONNECTION, rl_client_connect("redis://127.0.0.1:1", options, &client, &err),
                 &err);
    CHECK(now_ms() - started < 5000);
    CHECK(client.id == 0);
    /* The password is never echoed in messages. */
    CHECK_STATUS(RL_CONNECTION,
                 rl_client_connect("redis://user:s3cret@127.0.0.1:1", options, &client, &err),
                 &err);
    CHECK(err.message && !strstr(err.message, "s3cret"));
done:
    rl_options_free(&options, NULL);
    rl_error_free(&err);
}

static void status_names_cover_every_code(void) {
    static const struct {
        rl_status code;
        const char *name;
    } every[] = {
        {RL_OK, "RL_OK"},
        {RL_INVALID_ARGUMENT, "RL_INVALID_ARGUMENT"},
        {RL_TIMEOUT, "RL_TIMEOUT"},
        {RL_NOT_HELD, "RL_NOT_HELD"},
        {RL_LOCK_LOST, "RL_LOCK_LOST"},
        {RL_UPGRADE_NOT_ALLOWED, "RL_UPGRADE_NOT_ALLOWED"},
        {RL_CONNECTION, "RL_CONNECTION"},
        {RL_REDIS, "RL_REDIS"},
        {RL_CLOSED, "RL_CLOSED"},
        {RL_CANCELLED, "RL_CANCELLED"},
        {RL_INVALID_HANDLE, "RL_INVALID_HANDLE"},
        {RL_INTERNAL, "RL_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof every / sizeof every[0]; i++) {
        CHECK(strcmp(rl_status_name(every[i].code), every[i].name) == 0);
    }
    CHECK(strcmp(rl_status_name(999), "RL_UNKNOWN_STATUS") == 0);
    CHECK(strcmp(rl_status_name(-1), "RL_UNKNOWN_STATUS") == 0);
    CHECK(strlen(rl_version()) >= 5);
}

const test_case bad_input_tests[] = {
    {"bad input: NULL pointers are RL_INVALID_ARGUMENT", null_pointers_are_invalid_arguments},
    {"bad input: names must be 1..=1024 bytes of UTF-8", names_must_be_1_to_1024_bytes_of_utf8},
    {"bad input: tokens must be 1..=512 bytes of UTF-8", tokens_must_be_1_to_512_bytes_of_utf8},
    {"bad input: durations must be positive or the sentinel",
     durations_must_be_positive_or_the_sentinel},
    {"bad input: bad URLs and unreachable servers are reported",
     bad_urls_and_unreachable_servers_are_reported},
    {"bad input: status names cover every code", status_names_cover_every_code},
    {NULL, NULL},
};
