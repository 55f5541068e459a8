/* One conformance scenario's run through the C ABI: its two clients, owners, fences and
 * background acquires, and every verb of tests/conformance/README.md. Mirrors the Rust runner
 * (core/tests/conformance.rs): owner letters are random tokens, `A@2` the same token on client 2,
 * `-` client 2 as an administrator (client 1 for `close`). */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "conformance.h"

/* ---- clients and alerts -------------------------------------------------------------------- */

/* The library's contention callback: records the waiting owner's token. */
static void on_alert(void *user_data, const rl_contention_alert *alert) {
    alert_log *log = user_data;
    pthread_mutex_lock(&log->mutex);
    if (log->count < MAX_ALERTS) log->tokens[log->count++] = strdup(alert->owner_token);
    pthread_mutex_unlock(&log->mutex);
}

/* A number of the `clients` directive; false when it is not one. */
static bool setting(const step *st, const char *key, int64_t *out, char *why, size_t cap) {
    return conf_arg(st, key) == NULL || conf_arg_ms(st, key, out, why, cap);
}

/* Connects a client with key prefix `prefix`, the `clients` directive's other settings (`dir`,
 * NULL for none) and a contention callback writing to `log`. */
static bool connect_client(const step *dir, const char *prefix, alert_log *log, rl_client *out,
                           rl_error *err, char *why, size_t cap) {
    int64_t lease = -1, attempts = -1, after = -1;
    for (int i = 0; dir && i < dir->nargs; i++) {
        const char *key = dir->arg_key[i];
        if (strcmp(key, "lease") != 0 && strcmp(key, "alert_attempts") != 0 &&
            strcmp(key, "alert_after") != 0 && strcmp(key, "prefix") != 0) {
            snprintf(why, cap, "unknown client setting %s", key);
            return false;
        }
    }
    if (dir && (!setting(dir, "lease", &lease, why, cap) ||
                !setting(dir, "alert_attempts", &attempts, why, cap) ||
                !setting(dir, "alert_after", &after, why, cap)))
        return false;
    rl_options options = {0};
    bool ok = rl_options_new(&options, err) == RL_OK &&
              rl_options_set_prefix(options, prefix, err) == RL_OK &&
              rl_options_set_on_contention(options, on_alert, log, err) == RL_OK &&
              (lease < 0 || rl_options_set_lease_ms(options, lease, err) == RL_OK) &&
              ((attempts < 0 && after < 0) ||
               rl_options_set_contention_alert(options, after, attempts, err) == RL_OK) &&
              rl_client_connect(redis_url(), options, out, err) == RL_OK;
    rl_options_free(&options, NULL);
    if (!ok) snprintf(why, cap, "cannot connect a client: %s", err->message);
    return ok;
}

bool start_run(run *r, const scenario *sc, size_t n, char *why, size_t cap) {
    const step *dir = sc->nsteps > 0 && strcmp(sc->steps[0].verb, "clients") == 0 ? &sc->steps[0]
                                                                                   : NULL;
    /* Both first: end_run destroys both, even after a failed connect. */
    for (int i = 0; i < 2; i++) pthread_mutex_init(&r->alerts[i].mutex, NULL);
    const char *prefix = dir ? conf_arg(dir, "prefix") : NULL;
    conf_copy_word(r->prefix, prefix ? prefix : "conformance"); /* fits: a WORD of the file */
    for (int i = 0; i < 2; i++) {
        if (!connect_client(dir, r->prefix, &r->alerts[i], &r->clients[i], &r->err, why, cap))
            return false;
    }
    rl_owner random = {0};
    char *token = NULL;
    bool ok = rl_owner_random(&random, &r->err) == RL_OK &&
              rl_owner_token(random, &token, &r->err) == RL_OK;
    if (ok) snprintf(r->name, sizeof r->name, "conformance:%zu:%s", n, token);
    else snprintf(why, cap, "cannot make a lock name: %s", r->err.message);
    rl_string_free(token);
    rl_owner_free(&random, NULL);
    return ok;
}

static void join_background(background *bg) {
    pthread_join(bg->thread, NULL);
    bg->running = false;
    rl_lock_free(&bg->lock, NULL);
    rl_cancel_free(&bg->cancel, NULL);
}

void end_run(run *r) {
    /* Closing the clients first ends any background acquire still waiting (RL_CLOSED); once
     * closed, no callback writes to the alert logs. */
    for (int i = 0; i < 2; i++) rl_client_close(r->clients[i], NULL);
    for (int i = 0; i < MAX_BACKGROUND; i++) {
        if (!r->bg[i].running) continue;
        join_background(&r->bg[i]);
        rl_error_free(&r->bg[i].err);
    }
    for (size_t i = 0; i < r->nowners; i++) {
        rl_owner_free(&r->owners[i].owner, NULL);
        rl_owner_free(&r->owners[i].handed, NULL);
    }
    for (int i = 0; i < 2; i++) {
        rl_client_free(&r->clients[i], NULL);
        for (size_t a = 0; a < r->alerts[i].count; a++) free(r->alerts[i].tokens[a]);
        pthread_mutex_destroy(&r->alerts[i].mutex);
    }
    rl_error_free(&r->err);
}

/* ---- owners and views ---------------------------------------------------------------------- */

/* The owner of OWNER `spec` and the client (0 or 1) it acts on: "A" on client 1, "A@2" the same
 * token on client 2. */
static bool run_owner(run *r, const char *spec, int *client, rl_owner *out, char *why,
                      size_t cap) {
    char letter[WORD];
    conf_copy_word(letter, spec); /* spec fits: it came from a WORD buffer */
    *client = 0;
    char *at = strchr(letter, '@');
    if (at && strcmp(at + 1, "2") == 0) {
        *at = '\0';
        *client = 1;
    }
    owner_entry *entry = NULL;
    for (size_t i = 0; i < r->nowners; i++) {
        if (strcmp(r->owners[i].letter, letter) == 0) entry = &r->owners[i];
    }
    if (!entry) {
        if (r->nowners == MAX_OWNERS) {
            snprintf(why, cap, "too many owners");
            return false;
        }
        entry = &r->owners[r->nowners];
        *entry = (owner_entry){0};
        conf_copy_word(entry->letter, letter);
        if (rl_owner_random(&entry->owner, &r->err) != RL_OK) {
            snprintf(why, cap, "rl_owner_random: %s", r->err.message);
            return false;
        }
        r->nowners++;
    }
    if (*client == 0) {
        *out = entry->owner;
        return true;
    }
    if (entry->handed.id == 0) {
        char *token = NULL;
        if (rl_owner_token(entry->owner, &token, &r->err) != RL_OK) {
            snprintf(why, cap, "rl_owner_token: %s", r->err.message);
            return false;
        }
        rl_status status = rl_owner_from_token(token, &entry->handed, &r->err);
        rl_string_free(token);
        if (status != RL_OK) {
            snprintf(why, cap, "rl_owner_from_token: %s", r->err.message);
            return false;
        }
    }
    *out = entry->handed;
    return true;
}

/* A new handle of TARGET on client `client`: `lock`, or the `read` / `write` view of the
 * read/write lock of the scenario's name (free it with rl_lock_free). Returns the library's
 * status (RL_CLOSED on a closed client), with r->err set; an unknown target is an
 * RL_INVALID_ARGUMENT with `why` set. */
static rl_status open_view(run *r, int client, const char *target, rl_lock *out, char *why,
                           size_t cap) {
    rl_client c = r->clients[client];
    if (strcmp(target, "lock") == 0) return rl_client_lock(c, r->name, out, &r->err);
    bool read = strcmp(target, "read") == 0;
    if (!read && strcmp(target, "write") != 0) {
        snprintf(why, cap, "unknown target \"%s\"", target);
        return RL_INVALID_ARGUMENT;
    }
    rl_rwlock rw = {0};
    rl_status status = rl_client_read_write_lock(c, r->name, &rw, &r->err);
    if (status != RL_OK) return status;
    status = read ? rl_rwlock_read(rw, out, &r->err) : rl_rwlock_write(rw, out, &r->err);
    rl_rwlock_free(&rw, NULL);
    return status;
}

/* ---- background acquires ------------------------------------------------------------------- */

static void *acquire_in_background(void *arg) {
    background *bg = arg;
    bg->status = rl_lock_acquire_ex(bg->lock, bg->owner, bg->wait_ms, bg->lease_ms, bg->cancel,
                                    bg->label[0] ? bg->label : NULL, &bg->acquired, NULL,
                                    &bg->err);
    return NULL;
}

static background *find_background(run *r, const char *spec) {
    for (int i = 0; i < MAX_BACKGROUND; i++) {
        if (r->bg[i].running && strcmp(r->bg[i].spec, spec) == 0) return &r->bg[i];
    }
    return NULL;
}

/* `acquire&`: takes over `*lock` (zeroed) when the thread starts. */
static bool start_background(run *r, const step *st, rl_lock *lock, rl_owner owner, char *why,
                             size_t cap) {
    if (find_background(r, st->owner)) {
        snprintf(why, cap, "a second acquire& of %s before its await", st->owner);
        return false;
    }
    background *bg = NULL;
    for (int i = 0; i < MAX_BACKGROUND && !bg; i++) {
        if (!r->bg[i].running) bg = &r->bg[i];
    }
    if (!bg) {
        snprintf(why, cap, "too many acquire& at once");
        return false;
    }
    *bg = (background){0};
    conf_copy_word(bg->spec, st->owner);
    if (conf_arg(st, "label")) conf_copy_word(bg->label, conf_arg(st, "label"));
    if (!conf_arg_ms(st, "wait", &bg->wait_ms, why, cap) ||
        !conf_arg_ms(st, "lease", &bg->lease_ms, why, cap))
        return false;
    if (rl_cancel_new(&bg->cancel, &r->err) != RL_OK) {
        snprintf(why, cap, "rl_cancel_new: %s", r->err.message);
        return false;
    }
    bg->lock = *lock;
    bg->owner = owner;
    if (pthread_create(&bg->thread, NULL, acquire_in_background, bg) != 0) {
        rl_cancel_free(&bg->cancel, NULL);
        snprintf(why, cap, "pthread_create failed");
        return false;
    }
    bg->running = true;
    *lock = (rl_lock){0}; /* the background acquire owns it now */
    return true;
}

/* `await` and `cancel`: joins the background acquire of the step's OWNER (after triggering its
 * cancel token, for `cancel`) and checks its outcome. */
static bool finish_background(run *r, const step *st, bool cancel, char *why, size_t cap) {
    background *bg = find_background(r, st->owner);
    if (!bg) {
        snprintf(why, cap, "%s without an acquire& of %s", st->verb, st->owner);
        return false;
    }
    if (cancel) rl_cancel_trigger(bg->cancel, NULL);
    join_background(bg);
    bool ok;
    if (!cancel) {
        ok = conf_check_acquired(r, st, bg->status, &bg->acquired, &bg->err, why, cap);
    } else if (bg->status == RL_CANCELLED) {
        ok = conf_check(st, "ok", why, cap);
    } else {
        char got[1024], ended[1100];
        conf_verdict(bg->status, &bg->err, got, sizeof got);
        snprintf(ended, sizeof ended, "an acquire that had ended: %s", got);
        ok = conf_check(st, ended, why, cap);
    }
    rl_error_free(&bg->err);
    return ok;
}

/* ---- the steps ----------------------------------------------------------------------------- */

/* `spend_fences`: runs tests/conformance/spend_fences.lua on a plain connection, under the
 * clients' prefix. The script is read from the repository, so every runner runs the same one. */
static bool spend_fences(run *r, const step *st, char *why, size_t cap) {
    char *script = conf_read_beside("spend_fences.lua", why, cap);
    if (!script) return false;
    const char *eval[] = {"EVAL", script, "0", r->prefix};
    char reply[512];
    bool sent = redis_command(reply, sizeof reply, 4, eval);
    free(script);
    if (!sent) {
        snprintf(why, cap, "cannot send spend_fences.lua to redis-server");
        return false;
    }
    /* A RESP integer: how many counters were set; none set means nothing was spent. */
    char got[600];
    if (reply[0] == ':' && strtol(reply + 1, NULL, 10) >= 1) {
        snprintf(got, sizeof got, "ok");
    } else {
        reply[strcspn(reply, "\r\n")] = '\0';
        snprintf(got, sizeof got, "no fencing counter was set: %s", reply);
    }
    return conf_check(st, got, why, cap);
}

/* The steps of OWNER `-`; `*handled` is false for any other verb. */
static bool admin_step(run *r, const step *st, bool *handled, char *why, size_t cap) {
    *handled = true;
    if (strcmp(st->verb, "clients") == 0) {
        snprintf(why, cap, "clients must be a scenario's first step");
        return false;
    }
    if (strcmp(st->verb, "close") == 0) {
        rl_client_close(r->clients[0], NULL);
        return true;
    }
    if (strcmp(st->verb, "sleep") == 0) {
        int64_t ms;
        if (!conf_arg_ms(st, "ms", &ms, why, cap)) return false;
        if (ms < 0) {
            snprintf(why, cap, "sleep needs ms=N");
            return false;
        }
        sleep_ms(ms);
        return true;
    }
    if (strcmp(st->verb, "locked") == 0) {
        /* Held by anyone in any mode: the read view or the write view, asked on client 2. */
        bool locked[2] = {false, false};
        const char *const views[2] = {"read", "write"};
        for (int i = 0; i < 2; i++) {
            rl_lock view = {0};
            rl_status status = open_view(r, 1, views[i], &view, why, cap);
            if (status == RL_OK) status = rl_lock_is_locked(view, &locked[i], &r->err);
            rl_lock_free(&view, NULL);
            if (status != RL_OK) return conf_check_status(st, status, &r->err, why, cap);
        }
        return conf_check(st, locked[0] || locked[1] ? "true" : "false", why, cap);
    }
    if (strcmp(st->verb, "spend_fences") == 0) return spend_fences(r, st, why, cap);
    if (strcmp(st->verb, "force_unlock") == 0) {
        bool was_held = false;
        rl_status status = rl_client_force_unlock(r->clients[1], r->name, &was_held, &r->err);
        if (status != RL_OK) return conf_check_status(st, status, &r->err, why, cap);
        return conf_check(st, was_held ? "true" : "false", why, cap);
    }
    if (strcmp(st->verb, "inspect") == 0) {
        char *doc = NULL;
        rl_status status = rl_client_inspect(r->clients[1], r->name, &doc, &r->err);
        bool ok = status == RL_OK ? conf_check_inspect(st, doc, NULL, NULL, why, cap)
                                  : conf_check_status(st, status, &r->err, why, cap);
        rl_string_free(doc);
        return ok;
    }
    *handled = false;
    return false;
}

/* The steps on a lock view (`lock` is this step's handle; `await` and `cancel` come earlier). */
static bool lock_step(run *r, const step *st, rl_lock *lock, rl_owner owner, char *why,
                      size_t cap) {
    char got[1024];
    if (strcmp(st->verb, "acquire") == 0) {
        int64_t wait_ms, lease_ms;
        if (!conf_arg_ms(st, "wait", &wait_ms, why, cap) ||
            !conf_arg_ms(st, "lease", &lease_ms, why, cap))
            return false;
        rl_acquired acquired = {0};
        const char *label = conf_arg(st, "label");
        rl_status status =
            label ? rl_lock_acquire_ex(*lock, owner, wait_ms, lease_ms, (rl_cancel){0}, label,
                                       &acquired, NULL, &r->err)
                  : rl_lock_acquire(*lock, owner, wait_ms, lease_ms, &acquired, &r->err);
        return conf_check_acquired(r, st, status, &acquired, &r->err, why, cap);
    }
    if (strcmp(st->verb, "acquire&") == 0) return start_background(r, st, lock, owner, why, cap);
    if (strcmp(st->verb, "release") == 0) {
        uint32_t remaining = 0;
        rl_status status = rl_lock_release(*lock, owner, &remaining, &r->err);
        if (status == RL_OK && st->nexpect > 1) {
            snprintf(got, sizeof got, "ok remaining=%u", (unsigned)remaining);
        } else {
            conf_verdict(status, &r->err, got, sizeof got);
        }
        return conf_check(st, got, why, cap);
    }
    if (strcmp(st->verb, "extend") == 0) {
        int64_t lease_ms;
        if (!conf_arg_ms(st, "lease", &lease_ms, why, cap)) return false;
        if (!conf_arg(st, "lease")) {
            snprintf(why, cap, "extend needs lease=MS");
            return false;
        }
        return conf_check_status(st, rl_lock_extend(*lock, owner, lease_ms, &r->err), &r->err, why,
                            cap);
    }
    if (strcmp(st->verb, "held_by") == 0) {
        bool held = false;
        rl_status status = rl_lock_is_held_by(*lock, owner, &held, &r->err);
        if (status != RL_OK) return conf_check_status(st, status, &r->err, why, cap);
        return conf_check(st, held ? "true" : "false", why, cap);
    }
    if (strcmp(st->verb, "hold_count") == 0) {
        uint32_t count = 0;
        rl_status status = rl_lock_hold_count(*lock, owner, &count, &r->err);
        if (status != RL_OK) return conf_check_status(st, status, &r->err, why, cap);
        snprintf(got, sizeof got, "%u", (unsigned)count);
        return conf_check(st, got, why, cap);
    }
    if (strcmp(st->verb, "inspect") == 0) {
        char *doc = NULL, *token = NULL;
        rl_status status = rl_lock_inspect(*lock, &doc, &r->err);
        if (status == RL_OK) status = rl_owner_token(owner, &token, &r->err);
        const char *mode = strcmp(st->target, "read") == 0 ? "read" : "write";
        bool ok = status == RL_OK ? conf_check_inspect(st, doc, token, mode, why, cap)
                                  : conf_check_status(st, status, &r->err, why, cap);
        rl_string_free(doc);
        rl_string_free(token);
        return ok;
    }
    snprintf(why, cap, "unknown verb \"%s\"", st->verb);
    return false;
}

bool run_step(run *r, const step *st, char *why, size_t cap) {
    if (strcmp(st->owner, "-") == 0) {
        bool handled;
        bool ok = admin_step(r, st, &handled, why, cap);
        if (handled) return ok;
    }
    int client = 0;
    rl_owner owner = {0};
    if (!run_owner(r, st->owner, &client, &owner, why, cap)) return false;
    if (strcmp(st->verb, "alerts") == 0) return conf_check_alerts(r, st, client, owner, why, cap);
    if (strcmp(st->verb, "await") == 0) return finish_background(r, st, false, why, cap);
    if (strcmp(st->verb, "cancel") == 0) return finish_background(r, st, true, why, cap);
    if (st->target[0] == '\0') {
        snprintf(why, cap, "%s needs a target", st->verb);
        return false;
    }
    rl_lock lock = {0};
    why[0] = '\0';
    rl_status status = open_view(r, client, st->target, &lock, why, cap);
    if (status != RL_OK) {
        /* A closed client refuses the handle: that is the step's verdict. */
        return why[0] == '\0' && conf_check_status(st, status, &r->err, why, cap);
    }
    bool ok = lock_step(r, st, &lock, owner, why, cap);
    rl_lock_free(&lock, NULL);
    return ok;
}
