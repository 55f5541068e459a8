/* The C runner of the shared conformance scenarios (tests/conformance/scenarios.txt, format in
 * its README.md): the parsed file (conformance_parse.c), a scenario's running state and steps
 * (conformance_steps.c) with their checks (conformance_checks.c), a reader for the library's
 * inspect JSON (conformance_json.c), and the test itself (test_conformance.c). */
#ifndef REDLOCK_CONFORMANCE_H
#define REDLOCK_CONFORMANCE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    MAX_ALERTS = 64,    /* contention alerts kept per client and scenario */
    LINE = 4096,
    WHY = 4096,
};

/* ---- the scenario file (conformance_parse.c) ---------------------------------------------- */

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

/* Reads every scenario of the file at `path`; false with `why` set on a malformed file. */
bool conf_parse_file(const char *path, scenario_list *list, char *why, size_t cap);
void conf_free_scenarios(scenario_list *list);
/* Copies `word` into a WORD-sized buffer; false when it does not fit. */
bool conf_copy_word(char *dst, const char *word);
/* The value of argument `key` (the last one given), or NULL. */
const char *conf_arg(const step *st, const char *key);
/* An argument in milliseconds: `*out` = -1 when it is absent or "watchdog" (RL_WAIT_FOREVER for
 * wait, RL_LEASE_WATCHDOG for lease), else its value (negative values are passed as they are).
 * False when it is not a number. */
bool conf_arg_ms(const step *st, const char *key, int64_t *out, char *why, size_t cap);
/* The expectation words joined by spaces. */
void conf_expected(const step *st, char *buf, size_t cap);
/* The whole text of `file` in the scenario file's directory (e.g. "spend_fences.lua"), read at
 * run time like the scenarios (free it with free); NULL with `why` set when it cannot be read. */
char *conf_read_beside(const char *file, char *why, size_t cap);

/* ---- the library's inspect JSON (conformance_json.c) -------------------------------------- */

/* The raw text of `key`'s value in the JSON object `obj` (a string without its quotes, not
 * unescaped; a number, true, false or null as written); nested arrays and objects are skipped
 * over. False when the key is not there. */
bool json_value(const char *obj, size_t len, const char *key, char *out, size_t cap);
/* Finds, in the "holders" array of an inspect document, the holder with this owner token and
 * mode ("read" / "write"); `*obj` and `*len` get its object's text. False when there is none. */
bool json_find_holder(const char *doc, const char *token, const char *mode, const char **obj,
                      size_t *len);

/* ---- one scenario's run (conformance_steps.c) --------------------------------------------- */

typedef struct owner_entry {
    char letter[WORD];
    rl_owner owner;  /* a random token, used on client 1 */
    rl_owner handed; /* the same token on client 2 (`A@2`), made from the token on first use */
} owner_entry;

typedef struct fence_entry {
    char name[WORD];
    uint64_t token;
} fence_entry;

/* An `acquire&`: the acquire runs on its own thread until `await` or `cancel` joins it. */
typedef struct background {
    bool running;
    char spec[WORD]; /* the step's OWNER as written: `await` finds it by that */
    pthread_t thread;
    rl_lock lock;     /* owned by the background acquire: freed when joined */
    rl_owner owner;   /* borrowed from the run's owners */
    rl_cancel cancel; /* triggered by `cancel`, freed when joined */
    int64_t wait_ms, lease_ms;
    char label[WORD]; /* "" when the step has none */
    rl_status status;
    rl_acquired acquired;
    rl_error err;
} background;

/* The contention alerts one client received: the waiting owner's token of each. Filled by the
 * library's callback thread, read by the steps. */
typedef struct alert_log {
    pthread_mutex_t mutex;
    char *tokens[MAX_ALERTS];
    size_t count;
} alert_log;

typedef struct run {
    char prefix[WORD]; /* the clients' key prefix: `spend_fences` works under it */
    rl_client clients[2];
    alert_log alerts[2];
    char name[RL_MAX_NAME_LEN + 1];
    owner_entry owners[MAX_OWNERS];
    size_t nowners;
    fence_entry fences[MAX_FENCES];
    size_t nfences;
    background bg[MAX_BACKGROUND];
    rl_error err;
} run;

/* ---- verdicts and checks (conformance_checks.c) ------------------------------------------- */

/* The contract's name for a status: "ok" or an error kind in snake case; any other status is a
 * failure, with the library's message. */
void conf_verdict(rl_status status, const rl_error *err, char *buf, size_t cap);
/* `got` against the whole expectation ("ok remaining=0", "true", ...). */
bool conf_check(const step *st, const char *got, char *why, size_t cap);
/* A call's verdict against the whole expectation. */
bool conf_check_status(const step *st, rl_status status, const rl_error *err, char *why,
                       size_t cap);
/* How many alerts of the log name `token` as the waiter. */
size_t conf_alerts_naming(alert_log *log, const char *token);
/* Checks `ok [count=N] [fence=T] [fence>T]` against an acquire's outcome. */
bool conf_check_acquired(run *r, const step *st, rl_status status, const rl_acquired *got,
                         const rl_error *err, char *why, size_t cap);
/* Checks `ok [mode=M] [holders=N] [count=N] [label=T]` against an inspect document; `token` and
 * `mode` ("read"/"write") name OWNER's hold, NULL for `-`. */
bool conf_check_inspect(const step *st, const char *doc, const char *token, const char *mode,
                        char *why, size_t cap);
/* `N` / `>=N`: waits for client `client` to have that many alerts naming `owner` (README). */
bool conf_check_alerts(run *r, const step *st, int client, rl_owner owner, char *why,
                       size_t cap);

/* ---- running a scenario (conformance_steps.c) --------------------------------------------- */

/* Makes the clients of scenario `sc` (number `n`) and its lock name. */
bool start_run(run *r, const scenario *sc, size_t n, char *why, size_t cap);
/* Closes the clients (ending waits still running), joins the background acquires, frees all. */
void end_run(run *r);
/* Runs one step; false with `why` set when it does not reach its verdict. */
bool run_step(run *r, const step *st, char *why, size_t cap);

#endif
