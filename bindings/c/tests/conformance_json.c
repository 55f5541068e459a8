/* Just enough of a JSON reader for the library's inspect documents (see rl_lock_inspect in
 * redlock.h): values of one object's keys, and the holder objects of the "holders" array. It
 * scans strings with their escapes, so that text inside a string is never taken for syntax. */
#include <string.h>

#include "conformance.h"

/* The character after the string that starts at `p` (a '"'), or `end`. */
static const char *skip_string(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return end;
}

/* The character after the value that starts at `p`: a string, an array or object (with
 * everything nested in it), or a bare word (number, true, false, null). */
static const char *skip_value(const char *p, const char *end) {
    if (p < end && *p == '"') return skip_string(p, end);
    if (p < end && (*p == '[' || *p == '{')) {
        int depth = 0;
        while (p < end) {
            if (*p == '"') {
                p = skip_string(p, end);
                continue;
            }
            if (*p == '[' || *p == '{') depth++;
            if (*p == ']' || *p == '}') depth--;
            p++;
            if (depth == 0) break;
        }
        return p;
    }
    while (p < end && !strchr(",}] \t\r\n", *p)) p++;
    return p;
}

static const char *skip_space(const char *p, const char *end) {
    while (p < end && strchr(" \t\r\n", *p)) p++;
    return p;
}

/* The start of `key`'s value among the members of the object `obj` (which starts with '{'). */
static const char *find_member(const char *obj, size_t len, const char *key, const char **end) {
    *end = obj + len;
    const char *p = skip_space(obj, *end);
    if (p == *end || *p != '{') return NULL;
    p++;
    size_t key_len = strlen(key);
    while (p < *end) {
        p = skip_space(p, *end);
        if (p == *end || *p != '"') return NULL; /* '}' or malformed: no such key */
        const char *name = p + 1;
        p = skip_string(p, *end);
        bool match = (size_t)(p - 1 - name) == key_len && strncmp(name, key, key_len) == 0;
        p = skip_space(p, *end);
        if (p == *end || *p != ':') return NULL;
        p = skip_space(p + 1, *end);
        if (match) return p;
        p = skip_space(skip_value(p, *end), *end);
        if (p < *end && *p == ',') p++;
    }
    return NULL;
}

bool json_value(const char *obj, size_t len, const char *key, char *out, size_t cap) {
    const char *end;
    const char *value = find_member(obj, len, key, &end);
    if (!value || value == end) return false;
    const char *after = skip_value(value, end);
    if (*value == '"') { /* the text between the quotes */
        value++;
        after--;
    }
    size_t n = (size_t)(after - value);
    if (n >= cap) return false;
    memcpy(out, value, n);
    out[n] = '\0';
    return true;
}

bool json_find_holder(const char *doc, const char *token, const char *mode, const char **obj,
                      size_t *len) {
    const char *end;
    const char *p = find_member(doc, strlen(doc), "holders", &end);
    if (!p || *p != '[') return false;
    const char *array_end = skip_value(p, end);
    for (p = skip_space(p + 1, array_end); p < array_end && *p == '{';) {
        const char *holder_end = skip_value(p, array_end);
        char got_token[RL_MAX_TOKEN_LEN + 1], got_mode[16];
        size_t n = (size_t)(holder_end - p);
        if (json_value(p, n, "owner_token", got_token, sizeof got_token) &&
            json_value(p, n, "mode", got_mode, sizeof got_mode) && strcmp(got_token, token) == 0 &&
            strcmp(got_mode, mode) == 0) {
            *obj = p;
            *len = n;
            return true;
        }
        p = skip_space(holder_end, array_end);
        if (p < array_end && *p == ',') p = skip_space(p + 1, array_end);
    }
    return false;
}
