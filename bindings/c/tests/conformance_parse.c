/* The conformance scenario file (format: tests/conformance/README.md), parsed into steps. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

void conf_free_scenarios(scenario_list *list) {
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].title);
        free(list->items[i].steps);
    }
    free(list->items);
    *list = (scenario_list){0};
}

bool conf_copy_word(char *dst, const char *word) {
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
    if (!word || !conf_copy_word(st->owner, word)) {
        snprintf(why, cap, "no owner (or one too long)");
        return false;
    }
    word = strtok_r(NULL, space, &save);
    if (!word || !conf_copy_word(st->verb, word)) {
        snprintf(why, cap, "no verb (or one too long)");
        return false;
    }
    while ((word = strtok_r(NULL, space, &save)) != NULL) {
        char *eq = strchr(word, '=');
        if (!eq) {
            if (!conf_copy_word(st->target, word)) {
                snprintf(why, cap, "target too long: %s", word);
                return false;
            }
            continue;
        }
        *eq = '\0';
        if (st->nargs == MAX_ARGS || !conf_copy_word(st->arg_key[st->nargs], word) ||
            !conf_copy_word(st->arg_value[st->nargs], eq + 1)) {
            snprintf(why, cap, "too many or too long arguments");
            return false;
        }
        st->nargs++;
    }
    if (expect) {
        save = NULL;
        for (word = strtok_r(expect, space, &save); word; word = strtok_r(NULL, space, &save)) {
            if (st->nexpect == MAX_EXPECT || !conf_copy_word(st->expect[st->nexpect], word)) {
                snprintf(why, cap, "too many or too long expectations");
                return false;
            }
            st->nexpect++;
        }
    }
    return true;
}

bool conf_parse_file(const char *path, scenario_list *list, char *why, size_t cap) {
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

const char *conf_arg(const step *st, const char *key) {
    for (int i = st->nargs - 1; i >= 0; i--) {
        if (strcmp(st->arg_key[i], key) == 0) return st->arg_value[i];
    }
    return NULL;
}

bool conf_arg_ms(const step *st, const char *key, int64_t *out, char *why, size_t cap) {
    const char *value = conf_arg(st, key);
    if (!value || strcmp(value, "watchdog") == 0) {
        *out = -1;
        return true;
    }
    char *end = NULL;
    errno = 0;
    long long ms = strtoll(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0') {
        snprintf(why, cap, "%s=%s is not a number of milliseconds", key, value);
        return false;
    }
    *out = (int64_t)ms;
    return true;
}

void conf_expected(const step *st, char *buf, size_t cap) {
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < st->nexpect && used < cap; i++) {
        int n = snprintf(buf + used, cap - used, "%s%s", i ? " " : "", st->expect[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

char *conf_read_beside(const char *file, char *why, size_t cap) {
    const char *slash = strrchr(CONFORMANCE_SCENARIOS, '/');
    int dir_len = slash ? (int)(slash - CONFORMANCE_SCENARIOS + 1) : 0;
    char path[LINE];
    snprintf(path, sizeof path, "%.*s%s", dir_len, CONFORMANCE_SCENARIOS, file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    /* A short script: one read fills it, and a file that fills the buffer is refused. */
    enum { MAX_TEXT = 16384 };
    char *text = malloc(MAX_TEXT);
    size_t len = text ? fread(text, 1, MAX_TEXT, f) : 0;
    bool ok = text && !ferror(f) && len < MAX_TEXT;
    fclose(f);
    if (!ok) {
        snprintf(why, cap, "cannot read %s (or it is over %d bytes)", path, MAX_TEXT - 1);
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}
