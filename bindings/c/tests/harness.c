/* Checks and helpers of the C test suite. */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool test_failed = false;

void check_failed(const char *file, int line, const char *what, const char *detail) {
    test_failed = true;
    fprintf(stderr, "    FAILED %s:%d: %s%s%s\n", file, line, what, detail ? ": " : "",
            detail ? detail : "");
}

bool check_status(const char *file, int line, const char *call, rl_status expected,
                  rl_status actual, const rl_error *err) {
    if (expected == actual) return true;
    char detail[1024];
    snprintf(detail, sizeof detail, "expected %s, got %s (%s)", rl_status_name(expected),
             rl_status_name(actual),
             err && err->message ? err->message : "no message");
    check_failed(file, line, call, detail);
    return false;
}

rl_client connect_default(void) {
    rl_client client = {0};
    rl_error err = {0};
    if (rl_client_connect(redis_url(), (rl_options){0}, &client, &err) != RL_OK) {
        fprintf(stderr, "cannot connect to %s: %s\n", redis_url(), err.message);
        rl_error_free(&err);
        redis_stop();
        exit(2);
    }
    return client;
}

const char *unique_name(const char *tag) {
    /* Static ring of buffers: a test uses a handful of names at once. */
    static char names[8][128];
    static unsigned next = 0;
    static unsigned serial = 0;
    char *name = names[next++ % 8];
    snprintf(name, sizeof names[0], "c-test:%s:%ld:%u", tag, (long)getpid(), serial++);
    return name;
}

int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

bool eventually(bool (*done)(void *), void *arg, int64_t limit_ms) {
    int64_t deadline = now_ms() + limit_ms;
    do {
        if (done(arg)) return true;
        sleep_ms(10);
    } while (now_ms() < deadline);
    return done(arg);
}

bool json_has(const char *json, const char *key, const char *value) {
    char needle[256];
    snprintf(needle, sizeof needle, "\"%s\":%s", key, value);
    return json && strstr(json, needle) != NULL;
}

bool one_waiting_writer(void *lock) {
    char *json = NULL;
    bool one = rl_lock_inspect(*(rl_lock *)lock, &json, NULL) == RL_OK &&
               (json_has(json, "waiting_writers", "1,") || json_has(json, "waiting_writers", "1}"));
    rl_string_free(json);
    return one;
}

bool no_waiting_writers(void *lock) {
    char *json = NULL;
    bool none = rl_lock_inspect(*(rl_lock *)lock, &json, NULL) == RL_OK &&
                json_has(json, "waiting_writers", "0");
    rl_string_free(json);
    return none;
}
