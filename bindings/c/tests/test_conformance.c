/* The shared conformance scenarios (tests/conformance/scenarios.txt, format in its README.md),
 * run against the test redis-server through the C ABI. Every language runs the same file; this
 * runner mirrors the Rust one (core/tests/conformance.rs): two clients with key prefix
 * "conformance", a fresh lock name per scenario, owner letters mapped to random tokens, `A@2` the
 * same token on client 2, `-` client 2 as an administrator. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef CONFORMANCE_SCENARIOS
/* The Makefile passes the absolute path; this fallback works from the repository root. */
#define CONFORMANCE_SCENARIOS "tests/conformance/scenarios.txt"
#endif

enum {
    WORD = 64,          /* longest owner, verb, target, argument or expectation word */
    MAX_ARGS = 8,       /* KEY=VALUE arguments of one step */
    MAX_EXPECT = 8,     /* words after "->" */
    MAX_OWNERS = 32,    /* owner letters of one scenario */
    MAX_FENCES = 32,    /* fence names of one scenario */
    MAX_BACKGROUND = 8, /* acquire& not awaited yet, in one scenario */
    LINE = 4096,
    WHY = 4096,
};

/* ---- the scenario file ----------------------------------------------------------------- */

typedef struct step {
    int line;
    char owner[WORD];
    char verb[WORD];
    char target[WORD]; /* "" when the step has none */
    int nargs;
    char arg_key[MAX_ARGS][WORD];
    char arg_value[MAX_ARGS][WORD];
    int nexpect;
    char expect[MAX_EXPECT][WORD];
} step;

typedef struct scenario {
    char *title;
    step *steps;
    size_t nsteps, cap;
} scenario;

typedef struct scenario_list {
    scenario *items;
    size_t count, cap;
} scenario_list;

static void free_scenarios(scenario_list *list) {
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].title);
        free(list->items[i].steps);
    }
    free(list->items);
    *list = (scenario_list){0};
}

/* Copies `word` into a WORD-sized buffer; false when it does not fit. */
static bool copy_word(char *dst, const char *word) {
    size_t len = strlen(word);
    if (len >= WORD) return false;
    memcpy(dst, word, len + 1);
    return true;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

/* Parses one step line ("OWNER VERB [TARGET] [K=V]... -> EXPECT..."); false with `why` set. */
static bool parse_step(char *line, step *st, char *why, size_t cap) {
    static const char *const space = " \t";
    char *expect = NULL;
    char *arrow = strstr(line, "->");
    if (arrow) {
        *arrow = '\0';
        expect = arrow + 2;
    }
    char *save = NULL;
    char *word = strtok_r(line, space, &save);
    if (!word || !copy_word(st->owner, word)) {
        snprintf(why, cap, "no owner (or one too long)");
        return false;
    }
    word = strtok_r(NULL, space, &save);
    if (!word || !copy_word(st->verb, word)) {
        snprintf(why, cap, "no verb (or one too long)");
        return false;
    }
    while ((word = strtok_r(NULL, space, &save)) != NULL) {
        char *eq = strchr(word, '=');
        if (!eq) {
            if (!copy_word(st->target, word)) {
                snprintf(why, cap, "target too long: %s", word);
                return false;
            }
            continue;
        }
        *eq = '\0';
        if (st->nargs == MAX_ARGS || !copy_word(st->arg_key[st->nargs], word) ||
            !copy_word(st->arg_value[st->nargs], eq + 1)) {
            snprintf(why, cap, "too many or too long arguments");
            return false;
        }
        st->nargs++;
    }
    if (expect) {
        save = NULL;
        for (word = strtok_r(expect, space, &save); word; word = strtok_r(NULL, space, &save)) {
            if (st->nexpect == MAX_EXPECT || !copy_word(st->expect[st->nexpect], word)) {
                snprintf(why, cap, "too many or too long expectations");
                return false;
            }
            st->nexpect++;
        }
    }
    return true;
}

/* Reads every scenario of the file at `path`; false with `why` set on a malformed file. */
static bool parse_file(const char *path, scenario_list *list, char *why, size_t cap) {
    FILE *file = fopen(path, "r");
    if (!file) {
        snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
        return false;
    }
    char buf[LINE];
    int n = 0;
    bool ok = true;
    while (ok && fgets(buf, sizeof buf, file)) {
        n++;
        size_t len = strlen(buf);
        if (len == sizeof buf - 1 && buf[len - 1] != '\n' && !feof(file)) {
            snprintf(why, cap, "%s:%d: line too long", path, n);
            ok = false;
            break;
        }
        char *line = trim(buf);
        if (*line == '\0' || *line == '#') continue;
        if (strncmp(line, "scenario ", 9) == 0) {
            if (list->count == list->cap) {
                size_t cap2 = list->cap ? list->cap * 2 : 16;
                scenario *items = realloc(list->items, cap2 * sizeof *items);
                if (!items) {
                    snprintf(why, cap, "out of memory");
                    ok = false;
                    break;
                }
                list->items = items;
                list->cap = cap2;
            }
            scenario *sc = &list->items[list->count];
            *sc = (scenario){0};
            sc->title = strdup(trim(line + 9));
            if (!sc->title) {
                snprintf(why, cap, "out of memory");
                ok = false;
                break;
            }
            list->count++;
            continue;
        }
        if (list->count == 0) {
            snprintf(why, cap, "%s:%d: a step before any scenario", path, n);
            ok = false;
            break;
        }
        scenario *sc = &list->items[list->count - 1];
        if (sc->nsteps == sc->cap) {
            size_t cap2 = sc->cap ? sc->cap * 2 : 16;
            step *steps = realloc(sc->steps, cap2 * sizeof *steps);
            if (!steps) {
                snprintf(why, cap, "out of memory");
                ok = false;
                break;
            }
            sc->steps = steps;
            sc->cap = cap2;
        }
        step *st = &sc->steps[sc->nsteps];
        *st = (step){0};
        st->line = n;
        char detail[256];
        if (!parse_step(line, st, detail, sizeof detail)) {
            snprintf(why, cap, "%s:%d: %s", path, n, detail);
            ok = false;
            break;
        }
        sc->nsteps++;
    }
    if (ok && ferror(file)) {
        snprintf(why, cap, "cannot read %s", path);
        ok = false;
    }
    fclose(file);
    return ok;
}

/* The value of argument `key` (the last one given), or NULL. */
static const char *arg(const step *st, const char *key) {
    for (int i = st->nargs - 1; i >= 0; i--) {
        if (strcmp(st->arg_key[i], key) == 0) return st->arg_value[i];
    }
    return NULL;
}

/* An argument in milliseconds: `*out` = -1 when it is absent or "watchdog" (RL_WAIT_FOREVER for
 * wait, RL_LEASE_WATCHDOG for lease), else its value. False when it is not a number. */
static bool arg_ms(const step *st, const char *key, int64_t *out, char *why, size_t cap) {
    const char *value = arg(st, key);
    if (!value || strcmp(value, "watchdog") == 0) {
        *out = -1;
        return true;
    }
    char *end = NULL;
    errno = 0;
    long long ms = strtoll(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || ms < 0) {
        snprintf(why, cap, "%s=%s is not a number of milliseconds", key, value);
        return false;
    }
    *out = (int64_t)ms;
    return true;
}

/* The expectation words joined by spaces. */
static void expected(const step *st, char *buf, size_t cap) {
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < st->nexpect && used < cap; i++) {
        int n = snprintf(buf + used, cap - used, "%s%s", i ? " " : "", st->expect[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

/* ---- running a scenario ---------------------------------------------------------------- */

typedef struct owner_entry {
    char letter[WORD];
    rl_owner owner;   /* a random token, used on client 1 */
    rl_owner handed;  /* the same token on client 2 (`A@2`), made from the token on first use */
} owner_entry;

typedef struct fence_entry {
    char name[WORD];
    uint64_t token;
} fence_entry;

/* An `acquire&`: the acquire runs on its own thread until `await` joins it. */
typedef struct background {
    bool running;
    char spec[WORD]; /* the step's OWNER as written: `await` finds it by that */
    pthread_t thread;
    rl_lock lock;    /* owned by the background acquire: freed when joined */
    rl_owner owner;  /* borrowed from the run's owners */
    int64_t wait_ms, lease_ms;
    rl_status status;
    rl_acquired acquired;
    rl_error err;
} background;

typedef struct run {
    rl_client clients[2];
    char name[RL_MAX_NAME_LEN + 1];
    owner_entry owners[MAX_OWNERS];
    size_t nowners;
    fence_entry fences[MAX_FENCES];
    size_t nfences;
    background bg[MAX_BACKGROUND];
    rl_error err;
} run;

static void *acquire_in_background(void *arg) {
    background *bg = arg;
    bg->status =
        rl_lock_acquire(bg->lock, bg->owner, bg->wait_ms, bg->lease_ms, &bg->acquired, &bg->err);
    return NULL;
}

/* The contract's name for a status: "ok" or an error kind in snake case; any other status is a
 * failure, with the library's message. */
static void verdict(rl_status status, const rl_error *err, char *buf, size_t cap) {
    switch (status) {
    case RL_OK: snprintf(buf, cap, "ok"); break;
    case RL_TIMEOUT: snprintf(buf, cap, "timeout"); break;
    case RL_NOT_HELD: snprintf(buf, cap, "not_held"); break;
    case RL_LOCK_LOST: snprintf(buf, cap, "lock_lost"); break;
    case RL_UPGRADE_NOT_ALLOWED: snprintf(buf, cap, "upgrade_not_allowed"); break;
    default:
        snprintf(buf, cap, "failure (%s: %s)", rl_status_name(status),
                 err && err->message ? err->message : "no message");
        break;
    }
}

/* `got` against the whole expectation ("ok remaining=0", "true", ...). */
static bool check(const step *st, const char *got, char *why, size_t cap) {
    char want[512];
    expected(st, want, sizeof want);
    if (strcmp(got, want) == 0) return true;
    snprintf(why, cap, "expected %s, got %s", want, got);
    return false;
}

/* A call that must succeed to produce a value (held_by, hold_count, locked, ...). */
static bool call_ok(const step *st, rl_status status, const rl_error *err, char *why,
                    size_t cap) {
    if (status == RL_OK) return true;
    char got[1024];
    char want[512];
    verdict(status, err, got, sizeof got);
    expected(st, want, sizeof want);
    snprintf(why, cap, "expected %s, got %s", want, got);
    return false;
}

/* The owner of OWNER `spec` and the client (0 or 1) it acts on: "A" on client 1, "A@2" the same
 * token on client 2. */
static bool run_owner(run *r, const char *spec, int *client, rl_owner *out, char *why,
                      size_t cap) {
    char letter[WORD];
    copy_word(letter, spec); /* spec fits: it came from a WORD buffer */
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
        copy_word(entry->letter, letter);
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
 * read/write lock of the scenario's name. Free it with rl_lock_free. */
static bool open_view(run *r, int client, const char *target, rl_lock *out, char *why,
                      size_t cap) {
    rl_client c = r->clients[client];
    if (strcmp(target, "lock") == 0) {
        if (rl_client_lock(c, r->name, out, &r->err) == RL_OK) return true;
        snprintf(why, cap, "rl_client_lock: %s", r->err.message);
        return false;
    }
    bool read = strcmp(target, "read") == 0;
    if (!read && strcmp(target, "write") != 0) {
        snprintf(why, cap, "unknown target \"%s\"", target);
        return false;
    }
    rl_rwlock rw = {0};
    if (rl_client_read_write_lock(c, r->name, &rw, &r->err) != RL_OK) {
        snprintf(why, cap, "rl_client_read_write_lock: %s", r->err.message);
        return false;
    }
    rl_status status = read ? rl_rwlock_read(rw, out, &r->err) : rl_rwlock_write(rw, out, &r->err);
    if (status != RL_OK) snprintf(why, cap, "rl_rwlock_%s: %s", target, r->err.message);
    rl_rwlock_free(&rw, NULL);
    return status == RL_OK;
}

static fence_entry *find_fence(run *r, const char *name) {
    for (size_t i = 0; i < r->nfences; i++) {
        if (strcmp(r->fences[i].name, name) == 0) return &r->fences[i];
    }
    return NULL;
}

/* Checks `ok [count=N] [fence=T] [fence>T]` against an acquire's outcome. */
static bool check_acquired(run *r, const step *st, rl_status status, const rl_acquired *got,
                           const rl_error *err, char *why, size_t cap) {
    char seen[1024];
    verdict(status, err, seen, sizeof seen);
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
                copy_word(bound->name, c + 6);
                bound->token = got->fencing_token;
            }
            if (got->fencing_token != bound->token) {
                snprintf(why, cap, "fencing token %llu, expected %s=%llu",
                         (unsigned long long)got->fencing_token, c + 6,
                         (unsigned long long)bound->token);
                return false;
            }
        }
    }
    return true;
}

/* Runs one step; false with `why` set when it does not reach its verdict. */
static bool run_step(run *r, const step *st, char *why, size_t cap) {
    char got[1024];
    if (strcmp(st->verb, "sleep") == 0) {
        int64_t ms;
        if (!arg_ms(st, "ms", &ms, why, cap)) return false;
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
            if (!open_view(r, 1, views[i], &view, why, cap)) return false;
            rl_status status = rl_lock_is_locked(view, &locked[i], &r->err);
            rl_lock_free(&view, NULL);
            if (!call_ok(st, status, &r->err, why, cap)) return false;
        }
        return check(st, locked[0] || locked[1] ? "true" : "false", why, cap);
    }
    if (strcmp(st->verb, "force_unlock") == 0) {
        bool was_held = false;
        rl_status status = rl_client_force_unlock(r->clients[1], r->name, &was_held, &r->err);
        if (!call_ok(st, status, &r->err, why, cap)) return false;
        return check(st, was_held ? "true" : "false", why, cap);
    }

    int client = 0;
    rl_owner owner = {0};
    if (!run_owner(r, st->owner, &client, &owner, why, cap)) return false;

    if (strcmp(st->verb, "await") == 0) {
        background *bg = NULL;
        for (int i = 0; i < MAX_BACKGROUND; i++) {
            if (r->bg[i].running && strcmp(r->bg[i].spec, st->owner) == 0) bg = &r->bg[i];
        }
        if (!bg) {
            snprintf(why, cap, "await without an acquire& of %s", st->owner);
            return false;
        }
        pthread_join(bg->thread, NULL);
        bg->running = false;
        bool ok = check_acquired(r, st, bg->status, &bg->acquired, &bg->err, why, cap);
        rl_lock_free(&bg->lock, NULL);
        rl_error_free(&bg->err);
        return ok;
    }

    if (st->target[0] == '\0') {
        snprintf(why, cap, "%s needs a target", st->verb);
        return false;
    }
    rl_lock lock = {0};
    if (!open_view(r, client, st->target, &lock, why, cap)) return false;
    bool ok = false;

    if (strcmp(st->verb, "acquire") == 0) {
        int64_t wait_ms, lease_ms;
        if (!arg_ms(st, "wait", &wait_ms, why, cap) || !arg_ms(st, "lease", &lease_ms, why, cap))
            goto done;
        rl_acquired acquired = {0};
        rl_status status = rl_lock_acquire(lock, owner, wait_ms, lease_ms, &acquired, &r->err);
        ok = check_acquired(r, st, status, &acquired, &r->err, why, cap);
    } else if (strcmp(st->verb, "acquire&") == 0) {
        background *bg = NULL;
        for (int i = 0; i < MAX_BACKGROUND; i++) {
            if (r->bg[i].running && strcmp(r->bg[i].spec, st->owner) == 0) {
                snprintf(why, cap, "a second acquire& of %s before its await", st->owner);
                goto done;
            }
            if (!r->bg[i].running && !bg) bg = &r->bg[i];
        }
        if (!bg) {
            snprintf(why, cap, "too many acquire& at once");
            goto done;
        }
        *bg = (background){0};
        copy_word(bg->spec, st->owner);
        if (!arg_ms(st, "wait", &bg->wait_ms, why, cap) ||
            !arg_ms(st, "lease", &bg->lease_ms, why, cap))
            goto done;
        bg->lock = lock;
        bg->owner = owner;
        if (pthread_create(&bg->thread, NULL, acquire_in_background, bg) != 0) {
            bg->lock = (rl_lock){0};
            snprintf(why, cap, "pthread_create failed");
            goto done;
        }
        bg->running = true;
        lock = (rl_lock){0}; /* the background acquire owns it now */
        ok = true;
    } else if (strcmp(st->verb, "release") == 0) {
        uint32_t remaining = 0;
        rl_status status = rl_lock_release(lock, owner, &remaining, &r->err);
        if (status == RL_OK && st->nexpect > 1) {
            snprintf(got, sizeof got, "ok remaining=%u", (unsigned)remaining);
        } else {
            verdict(status, &r->err, got, sizeof got);
        }
        ok = check(st, got, why, cap);
    } else if (strcmp(st->verb, "extend") == 0) {
        int64_t lease_ms;
        if (!arg_ms(st, "lease", &lease_ms, why, cap)) goto done;
        if (lease_ms < 0) {
            snprintf(why, cap, "extend needs lease=MS");
            goto done;
        }
        rl_status status = rl_lock_extend(lock, owner, lease_ms, &r->err);
        verdict(status, &r->err, got, sizeof got);
        ok = check(st, got, why, cap);
    } else if (strcmp(st->verb, "held_by") == 0) {
        bool held = false;
        rl_status status = rl_lock_is_held_by(lock, owner, &held, &r->err);
        ok = call_ok(st, status, &r->err, why, cap) && check(st, held ? "true" : "false", why, cap);
    } else if (strcmp(st->verb, "hold_count") == 0) {
        uint32_t count = 0;
        rl_status status = rl_lock_hold_count(lock, owner, &count, &r->err);
        if (call_ok(st, status, &r->err, why, cap)) {
            snprintf(got, sizeof got, "%u", (unsigned)count);
            ok = check(st, got, why, cap);
        }
    } else {
        snprintf(why, cap, "unknown verb \"%s\"", st->verb);
    }
done:
    rl_lock_free(&lock, NULL);
    return ok;
}

/* Connects a client with key prefix "conformance" and the defaults otherwise. */
static bool connect_conformance(rl_client *out, rl_error *err) {
    rl_options options = {0};
    bool ok = rl_options_new(&options, err) == RL_OK &&
              rl_options_set_prefix(options, "conformance", err) == RL_OK &&
              rl_client_connect(redis_url(), options, out, err) == RL_OK;
    rl_options_free(&options, NULL);
    return ok;
}

/* Sets up a run for scenario number `n`: two clients and a lock name of its own. */
static bool start_run(run *r, size_t n, char *why, size_t cap) {
    for (int i = 0; i < 2; i++) {
        if (!connect_conformance(&r->clients[i], &r->err)) {
            snprintf(why, cap, "cannot connect client %d: %s", i + 1, r->err.message);
            return false;
        }
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

static void end_run(run *r) {
    /* Closing the clients first ends any background acquire still waiting (RL_CLOSED). */
    for (int i = 0; i < 2; i++) rl_client_close(r->clients[i], NULL);
    for (int i = 0; i < MAX_BACKGROUND; i++) {
        background *bg = &r->bg[i];
        if (!bg->running) continue;
        pthread_join(bg->thread, NULL);
        bg->running = false;
        rl_lock_free(&bg->lock, NULL);
        rl_error_free(&bg->err);
    }
    for (size_t i = 0; i < r->nowners; i++) {
        rl_owner_free(&r->owners[i].owner, NULL);
        rl_owner_free(&r->owners[i].handed, NULL);
    }
    for (int i = 0; i < 2; i++) rl_client_free(&r->clients[i], NULL);
    rl_error_free(&r->err);
}

static void every_scenario_reaches_its_verdicts(void) {
    scenario_list list = {0};
    char why[WHY];
    if (!parse_file(CONFORMANCE_SCENARIOS, &list, why, sizeof why)) {
        check_failed(__FILE__, __LINE__, "parse " CONFORMANCE_SCENARIOS, why);
        free_scenarios(&list);
        return;
    }
    CHECK(list.count >= 10); /* the scenario file was read */
    int failures = 0;
    for (size_t n = 0; n < list.count; n++) {
        const scenario *sc = &list.items[n];
        run *r = calloc(1, sizeof *r);
        if (!r) {
            check_failed(__FILE__, __LINE__, "calloc", "out of memory");
            break;
        }
        bool ok = start_run(r, n, why, sizeof why);
        for (size_t i = 0; ok && i < sc->nsteps; i++) {
            char step_why[WHY - 64];
            if (!run_step(r, &sc->steps[i], step_why, sizeof step_why)) {
                snprintf(why, sizeof why, "line %d: %s", sc->steps[i].line, step_why);
                ok = false;
            }
        }
        end_run(r);
        free(r);
        if (ok) {
            printf("ok   %s\n", sc->title);
        } else {
            printf("FAIL %s: %s\n", sc->title, why);
            failures++;
        }
        fflush(stdout);
    }
    if (failures > 0) {
        char detail[64];
        snprintf(detail, sizeof detail, "%d of %zu scenarios failed", failures, list.count);
        check_failed(__FILE__, __LINE__, "every scenario reaches its verdicts", detail);
    }
    free_scenarios(&list);
}

const test_case conformance_tests[] = {
    {"conformance: every scenario reaches its verdicts", every_scenario_reaches_its_verdicts},
    {NULL, NULL},
};
