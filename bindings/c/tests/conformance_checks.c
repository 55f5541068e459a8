/* The verdicts of the conformance steps, and the checks of acquisitions, inspect snapshots and
 * contention alerts (tests/conformance/README.md). */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "conformance.h"

/* ---- verdicts ------------------------------------------------------------------------------ */

void conf_verdict(rl_status status, const rl_error *err, char *buf, size_t cap) {
    switch (status) {
    case RL_OK: snprintf(buf, cap, "ok"); break;
    case RL_INVALID_ARGUMENT: snprintf(buf, cap, "invalid_argument"); break;
    case RL_TIMEOUT: snprintf(buf, cap, "timeout"); break;
    case RL_NOT_HELD: snprintf(buf, cap, "not_held"); break;
    case RL_LOCK_LOST: snprintf(buf, cap, "lock_lost"); break;
    case RL_UPGRADE_NOT_ALLOWED: snprintf(buf, cap, "upgrade_not_allowed"); break;
    case RL_CLOSED: snprintf(buf, cap, "closed"); break;
    case RL_REDIS: snprintf(buf, cap, "redis"); break;
    default:
        snprintf(buf, cap, "failure (%s: %s)", rl_status_name(status),
                 err && err->message ? err->message : "no message");
        break;
    }
}

bool conf_check(const step *st, const char *got, char *why, size_t cap) {
    char want[512];
    conf_expected(st, want, sizeof want);
    if (strcmp(got, want) == 0) return true;
    snprintf(why, cap, "expected %s, got %s", want, got);
    return false;
}

bool conf_check_status(const step *st, rl_status status, const rl_error *err, char *why,
                       size_t cap) {
    char got[1024];
    conf_verdict(status, err, got, sizeof got);
    return conf_check(st, got, why, cap);
}

/* ---- contention alerts ------------------------------------------------------------------- */

size_t conf_alerts_naming(alert_log *log, const char *token) {
    size_t n = 0;
    pthread_mutex_lock(&log->mutex);
    for (size_t i = 0; i < log->count; i++) {
        if (log->tokens[i] && strcmp(log->tokens[i], token) == 0) n++;
    }
    pthread_mutex_unlock(&log->mutex);
    return n;
}

/* ---- checks of acquisitions and snapshots -------------------------------------------------- */

static fence_entry *find_fence(run *r, const char *name) {
    for (size_t i = 0; i < r->nfences; i++) {
        if (strcmp(r->fences[i].name, name) == 0) return &r->fences[i];
    }
    return NULL;
}

bool conf_check_acquired(run *r, const step *st, rl_status status, const rl_acquired *got,
                         const rl_error *err, char *why, size_t cap) {
    char seen[1024];
    conf_verdict(status, err, seen, sizeof seen);
    const char *want = st->nexpect > 0 ? st->expect[0] : "";
    if (strcmp(seen, want) != 0) {
        snprintf(why, cap, "expected %s, got %s", want, seen);
        return false;
    }
    if (status != RL_OK) return true;
    for (int i = 1; i < st->nexpect; i++) {
        const char *c = st->expect[i];
        if (strncmp(c, "count=", 6) == 0) {
            char count[16];
            snprintf(count, sizeof count, "%u", (unsigned)got->hold_count);
            if (strcmp(count, c + 6) != 0) {
                snprintf(why, cap, "hold count %s, expected %s", count, c + 6);
                return false;
            }
        } else if (strncmp(c, "fence>", 6) == 0) {
            fence_entry *bound = find_fence(r, c + 6);
            if (!bound) {
                snprintf(why, cap, "fence>%s before %s was bound with fence=", c + 6, c + 6);
                return false;
            }
            if (got->fencing_token <= bound->token) {
                snprintf(why, cap, "fencing token %llu not above %s=%llu",
                         (unsigned long long)got->fencing_token, c + 6,
                         (unsigned long long)bound->token);
                return false;
            }
        } else if (strncmp(c, "fence=", 6) == 0) {
            fence_entry *bound = find_fence(r, c + 6);
            if (!bound) {
                if (r->nfences == MAX_FENCES) {
                    snprintf(why, cap, "too many fence names");
                    return false;
                }
                bound = &r->fences[r->nfences++];
                conf_copy_word(bound->name, c + 6);
                bound->token = got->fencing_token;
            }
            if (got->fencing_token != bound->token) {
                snprintf(why, cap, "fencing token %llu, expected %s=%llu",
                         (unsigned long long)got->fencing_token, c + 6,
                         (unsigned long long)bound->token);
                return false;
            }
        } else {
            snprintf(why, cap, "unknown check %s", c);
            return false;
        }
    }
    return true;
}

bool conf_check_inspect(const step *st, const char *doc, const char *token, const char *mode,
                        char *why, size_t cap) {
    if (st->nexpect == 0 || strcmp(st->expect[0], "ok") != 0) return conf_check(st, "ok", why, cap);
    const char *holder = NULL;
    size_t holder_len = 0;
    bool found = token && json_find_holder(doc, token, mode, &holder, &holder_len);
    for (int i = 1; i < st->nexpect; i++) {
        const char *c = st->expect[i];
        const char *want = strchr(c, '=');
        if (!want) {
            snprintf(why, cap, "bad check %s", c);
            return false;
        }
        size_t key_len = (size_t)(want++ - c);
        char got[512] = "";
        bool have;
        if (strncmp(c, "mode", key_len) == 0 && key_len == 4) {
            have = json_value(doc, strlen(doc), "mode", got, sizeof got);
            if (have && strcmp(got, "null") == 0) snprintf(got, sizeof got, "none");
        } else if (strncmp(c, "holders", key_len) == 0 && key_len == 7) {
            have = json_value(doc, strlen(doc), "holder_count", got, sizeof got);
        } else if ((strncmp(c, "count", key_len) == 0 && key_len == 5) ||
                   (strncmp(c, "label", key_len) == 0 && key_len == 5)) {
            if (!token) {
                snprintf(why, cap, "%s needs an owner and a target", c);
                return false;
            }
            bool count = c[0] == 'c';
            if (!found && count) {
                have = true;
                snprintf(got, sizeof got, "0");
            } else {
                have = found && json_value(holder, holder_len, count ? "hold_count" : "thread",
                                           got, sizeof got);
            }
        } else {
            snprintf(why, cap, "unknown inspect check %s", c);
            return false;
        }
        if (!have || strcmp(got, want) != 0) {
            snprintf(why, cap, "expected %s, got %.*s=%s in %s", c, (int)key_len, c,
                     have ? got : "(none)", doc);
            return false;
        }
    }
    return true;
}

bool conf_check_alerts(run *r, const step *st, int client, rl_owner owner, char *why,
                       size_t cap) {
    const char *want = st->nexpect > 0 ? st->expect[0] : "";
    bool at_least = strncmp(want, ">=", 2) == 0;
    char *end = NULL;
    long n = strtol(at_least ? want + 2 : want, &end, 10);
    if (end == want || *end != '\0' || n < 0) {
        snprintf(why, cap, "bad alert count \"%s\"", want);
        return false;
    }
    char *token = NULL;
    if (rl_owner_token(owner, &token, &r->err) != RL_OK) {
        snprintf(why, cap, "rl_owner_token: %s", r->err.message);
        return false;
    }
    int64_t deadline = now_ms() + 2000;
    while ((long)conf_alerts_naming(&r->alerts[client], token) < n && now_ms() < deadline) {
        sleep_ms(20);
    }
    if (!at_least) sleep_ms(200);
    long got = (long)conf_alerts_naming(&r->alerts[client], token);
    rl_string_free(token);
    if (at_least ? got >= n : got == n) return true;
    snprintf(why, cap, "expected %s alerts, got %ld", want, got);
    return false;
}
