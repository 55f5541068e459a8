/* rl_set_log_callback: the library's log lines reach a C callback at the level asked, and stop
 * when asked; bad levels are refused. */
#include <stdatomic.h>
#include <string.h>

#include "harness.h"

typedef struct {
    atomic_int lines;
    atomic_int lost_lines;
    atomic_int too_verbose;
    char lost_message[512];
    char lost_target[128];
} seen_lines;

static seen_lines seen; /* valid for the life of the process, as the callback's user data must be */

static void on_log(void *user_data, rl_log_level level, const char *target, const char *message) {
    seen_lines *s = user_data;
    atomic_fetch_add(&s->lines, 1);
    if (level > RL_LOG_WARN) atomic_fetch_add(&s->too_verbose, 1);
    if (strncmp(message, "lock lost", 9) == 0 && level == RL_LOG_WARN) {
        snprintf(s->lost_message, sizeof s->lost_message, "%s", message);
        snprintf(s->lost_target, sizeof s->lost_target, "%s", target);
        atomic_fetch_add(&s->lost_lines, 1);
    }
}

static bool a_lost_line(void *arg) { return atomic_load(&((seen_lines *)arg)->lost_lines) > 0; }

/* Loses one watched hold of a client with a short lease: force-unlocked by another client. */
static void lose_a_hold(const char *name, rl_error *err) {
    rl_options options = {0};
    rl_client client = {0}, admin = connect_default();
    rl_lock lock = {0};
    rl_owner owner = {0};
    rl_hold hold = {0};
    TRY(rl_options_new(&options, err), err);
    TRY(rl_options_set_lease_ms(options, 600, err), err);
    TRY(rl_client_connect(redis_url(), options, &client, err), err);
    TRY(rl_client_lock(client, name, &lock, err), err);
    TRY(rl_owner_random(&owner, err), err);
    TRY(rl_lock_acquire_ex(lock, owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, NULL, NULL, &hold,
                           err),
        err);
    bool was_held = false, lost = false;
    TRY(rl_client_force_unlock(admin, name, &was_held, err), err);
    TRY(rl_hold_wait_lost(hold, 3000, (rl_cancel){0}, &lost, err), err);
    CHECK(lost);
    sleep_ms(100); /* the line is written as the loss is reported */
done:
    rl_hold_free(&hold, NULL);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_client_free(&admin, NULL);
    rl_options_free(&options, NULL);
}

static void log_lines_reach_the_callback_at_the_level_asked(void) {
    rl_error err = {0};
    memset(&seen, 0, sizeof seen);
    REQUIRE_OK(rl_set_log_callback(RL_LOG_WARN, on_log, &seen, &err), &err);
    const char *name = unique_name("logged");
    lose_a_hold(name, &err);
    CHECK(eventually(a_lost_line, &seen, 3000));
    CHECK(strstr(seen.lost_message, name) != NULL);
    CHECK(strncmp(seen.lost_target, "redlock_core", 12) == 0);
    CHECK(atomic_load(&seen.too_verbose) == 0);

    /* Off: no more lines. */
    CHECK_OK(rl_set_log_callback(RL_LOG_OFF, on_log, &seen, &err), &err);
    int before = atomic_load(&seen.lines);
    lose_a_hold(unique_name("not-logged"), &err);
    CHECK(atomic_load(&seen.lines) == before);
    /* A NULL callback is off too. */
    CHECK_OK(rl_set_log_callback(RL_LOG_WARN, NULL, NULL, &err), &err);
    rl_error_free(&err);
}

static void a_bad_log_level_is_refused(void) {
    rl_error err = {0};
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_set_log_callback(6, on_log, &seen, &err), &err);
    CHECK(err.message && strstr(err.message, "log level") != NULL);
    CHECK_STATUS(RL_INVALID_ARGUMENT, rl_set_log_callback(-1, on_log, &seen, &err), &err);
    CHECK_OK(rl_set_log_callback(RL_LOG_OFF, NULL, NULL, NULL), NULL);
    rl_error_free(&err);
}

const test_case log_tests[] = {
    {"log_lines_reach_the_callback_at_the_level_asked", log_lines_reach_the_callback_at_the_level_asked},
    {"a_bad_log_level_is_refused", a_bad_log_level_is_refused},
    {NULL, NULL},
};
