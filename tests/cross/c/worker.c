/* The C worker of the cross-language tests (tests/cross/PROTOCOL.md): adapts the C ABI of
 * libredlock to the protocol, no lock logic of its own.
 *
 *   worker MODE REDIS_URL LOCK_NAME ARG...
 *
 * Modes: mutex COUNTER_FILE SECTIONS RECORD_FILE | read|write EVENT_LOG SECTIONS RECORD_FILE |
 *        hold TOKEN | release TOKEN | wait READY_FILE
 *
 * Exits 0 once the mode's work is done; on any error prints a message on stderr, frees what it
 * made (closing the client) and exits 1. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

#define LANG "c"
#define PREFIX "cross"
#define HOLD_LEASE_MS 60000
#define WAIT_RECHECK_MS 60000

/* Everything the worker makes, so that every exit path frees it all. */
static struct {
    rl_error err;
    rl_options options;
    rl_client client;
    rl_rwlock rwlock;
    rl_lock lock;
    rl_owner owner;
    int held; /* g.owner holds g.lock and should release it */
} g;

static void report_free(rl_status st, const rl_error *err, const char *what, int *ok) {
    if (st == RL_OK) return;
    fprintf(stderr, "worker(c): %s failed: %s: %s\n", what, rl_status_name(st),
            err->message ? err->message : "(no message)");
    *ok = 0;
}

/* Frees every handle (a zero handle is a no-op) and the error, closing the client. A hold
 * still marked as ours (an error exit inside a section) is released first, best effort.
 * Returns whether everything went cleanly (reported on stderr otherwise). */
static int cleanup(void) {
    int ok = 1;
    rl_error err = {0};
    if (g.held) {
        g.held = 0;
        report_free(rl_lock_release(g.lock, g.owner, NULL, &err), &err, "release (cleanup)", &ok);
    }
    report_free(rl_owner_free(&g.owner, &err), &err, "rl_owner_free", &ok);
    report_free(rl_lock_free(&g.lock, &err), &err, "rl_lock_free", &ok);
    report_free(rl_rwlock_free(&g.rwlock, &err), &err, "rl_rwlock_free", &ok);
    report_free(rl_client_free(&g.client, &err), &err, "rl_client_free", &ok);
    report_free(rl_options_free(&g.options, &err), &err, "rl_options_free", &ok);
    rl_error_free(&err);
    rl_error_free(&g.err);
    return ok;
}

/* Prints "worker(c): <formatted>" on stderr, frees everything and exits 1. */
static void die(const char *fmt, ...) {
    va_list ap;
    fputs("worker(c): ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    cleanup();
    exit(1);
}

/* Checks an rl_status: on failure prints what failed with the rl_error message and exits. */
static void must(rl_status st, const char *what) {
    if (st == RL_OK) return;
    die("%s failed: %s: %s", what, rl_status_name(st),
        g.err.message ? g.err.message : "(no message)");
}

static void die_errno(const char *what, const char *path) {
    die("%s %s: %s", what, path, strerror(errno));
}

static int64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) die("clock_gettime: %s", strerror(errno));
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(long ms) {
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
    while (nanosleep(&req, &rem) != 0) {
        if (errno != EINTR) die("nanosleep: %s", strerror(errno));
        req = rem;
    }
}

/* Writes all of buf to fd (one write() for a regular file; loops only on a short write). */
static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Appends one whole line with a single write() to a file opened with O_APPEND. */
static void append_line(const char *path, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof line) die("line too long for %s", path);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) die_errno("open", path);
    ssize_t n = write(fd, line, (size_t)len);
    if (n != len) {
        int e = n < 0 ? errno : EIO;
        close(fd);
        errno = e;
        die_errno("append to", path);
    }
    if (close(fd) != 0) die_errno("close", path);
}

static void append_record(const char *path, long long value, uint64_t fencing, int64_t wait_us) {
    append_line(path, "%s %ld %lld %" PRIu64 " %" PRId64 "\n", LANG, (long)getpid(), value,
                fencing, wait_us);
}

/* The integer in the counter file: missing or empty (or only whitespace) = 0. */
static long long read_counter(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        die_errno("open", path);
    }
    char buf[64];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            errno = e;
            die_errno("read", path);
        }
        if (n == 0) break;
        len += (size_t)n;
        if (len == sizeof buf - 1) {
            close(fd);
            die("counter file %s: content too long", path);
        }
    }
    close(fd);
    buf[len] = '\0';
    const char *p = buf;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '\0') return 0;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno != 0 || end == p) die("counter file %s: not an integer: \"%s\"", path, buf);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (*end != '\0') die("counter file %s: not an integer: \"%s\"", path, buf);
    return v;
}

/* Truncates the counter file and writes the integer (no rename: a non-atomic resource). */
static void write_counter(const char *path, long long value) {
    char text[32];
    int len = snprintf(text, sizeof text, "%lld", value);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die_errno("open", path);
    if (write_all(fd, text, (size_t)len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        die_errno("write", path);
    }
    if (close(fd) != 0) die_errno("close", path);
}

static long parse_sections(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0) die("bad SECTIONS: \"%s\"", s);
    return v;
}

static void print_stdout(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vprintf(fmt, ap);
    va_end(ap);
    if (n < 0 || fflush(stdout) != 0) die("writing to stdout: %s", strerror(errno));
}

static void connect_client(const char *url, int recheck_60s) {
    must(rl_options_new(&g.options, &g.err), "rl_options_new");
    must(rl_options_set_prefix(g.options, PREFIX, &g.err), "rl_options_set_prefix");
    if (recheck_60s)
        must(rl_options_set_recheck_interval_ms(g.options, WAIT_RECHECK_MS, &g.err),
             "rl_options_set_recheck_interval_ms");
    must(rl_client_connect(url, g.options, &g.client, &g.err), "rl_client_connect");
    must(rl_options_free(&g.options, &g.err), "rl_options_free");
}

/* Times one acquire: fills *fencing and returns the wait in microseconds. */
static int64_t timed_acquire(int64_t lease_ms, uint64_t *fencing, const char *what) {
    rl_acquired got = {0};
    int64_t t0 = clock_ns(CLOCK_MONOTONIC);
    rl_status st = rl_lock_acquire(g.lock, g.owner, RL_WAIT_FOREVER, lease_ms, &got, &g.err);
    if (st == RL_OK) g.held = 1; /* before anything that may exit */
    int64_t t1 = clock_ns(CLOCK_MONOTONIC);
    must(st, what);
    *fencing = got.fencing_token;
    return (t1 - t0) / 1000;
}

/* Releases the hold timed_acquire took (once: a failed release is not retried by cleanup). */
static void release_held(const char *what) {
    g.held = 0;
    must(rl_lock_release(g.lock, g.owner, NULL, &g.err), what);
}

static void mode_mutex(const char *name, const char *counter_file, long sections,
                       const char *record_file) {
    must(rl_client_lock(g.client, name, &g.lock, &g.err), "rl_client_lock");
    must(rl_owner_random(&g.owner, &g.err), "rl_owner_random");
    for (long i = 1; i <= sections; i++) {
        uint64_t fencing;
        int64_t wait_us = timed_acquire(RL_LEASE_WATCHDOG, &fencing, "acquire (mutex)");
        long long value = read_counter(counter_file) + 1;
        write_counter(counter_file, value);
        append_record(record_file, value, fencing, wait_us);
        release_held("release (mutex)");
    }
}

static void mode_rw(const char *name, int write_view, const char *event_log, long sections,
                    const char *record_file) {
    const char tag = write_view ? 'W' : 'R';
    long pid = (long)getpid();
    must(rl_client_read_write_lock(g.client, name, &g.rwlock, &g.err),
         "rl_client_read_write_lock");
    if (write_view)
        must(rl_rwlock_write(g.rwlock, &g.lock, &g.err), "rl_rwlock_write");
    else
        must(rl_rwlock_read(g.rwlock, &g.lock, &g.err), "rl_rwlock_read");
    must(rl_owner_random(&g.owner, &g.err), "rl_owner_random");
    for (long i = 1; i <= sections; i++) {
        uint64_t fencing;
        int64_t wait_us =
            timed_acquire(RL_LEASE_WATCHDOG, &fencing, write_view ? "acquire (write)" : "acquire (read)");
        append_line(event_log, "enter %c %ld\n", tag, pid);
        sleep_ms(2);
        append_line(event_log, "exit %c %ld\n", tag, pid);
        append_record(record_file, i, fencing, wait_us);
        release_held(write_view ? "release (write)" : "release (read)");
    }
}

static void mode_hold(const char *name, const char *token) {
    uint64_t fencing;
    must(rl_client_lock(g.client, name, &g.lock, &g.err), "rl_client_lock");
    must(rl_owner_from_token(token, &g.owner, &g.err), "rl_owner_from_token");
    timed_acquire(HOLD_LEASE_MS, &fencing, "acquire (hold)");
    print_stdout("held %" PRIu64 "\n", fencing);
    /* Not released: the hold keeps its fixed lease in Redis after the client closes. */
    g.held = 0;
}

static void mode_release(const char *name, const char *token) {
    uint32_t remaining = 0;
    must(rl_client_lock(g.client, name, &g.lock, &g.err), "rl_client_lock");
    must(rl_owner_from_token(token, &g.owner, &g.err), "rl_owner_from_token");
    must(rl_lock_release(g.lock, g.owner, &remaining, &g.err), "release (by token)");
    print_stdout("released %" PRIu32 "\n", remaining);
}

static void mode_wait(const char *name, const char *ready_file) {
    uint64_t fencing;
    must(rl_client_lock(g.client, name, &g.lock, &g.err), "rl_client_lock");
    must(rl_owner_random(&g.owner, &g.err), "rl_owner_random");
    int fd = open(ready_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die_errno("create", ready_file);
    if (close(fd) != 0) die_errno("close", ready_file);
    timed_acquire(RL_LEASE_WATCHDOG, &fencing, "acquire (wait)");
    int64_t unix_ms = clock_ns(CLOCK_REALTIME) / 1000000;
    print_stdout("acquired %" PRIu64 " %" PRId64 "\n", fencing, unix_ms);
    release_held("release (wait)");
}

static void usage(void) {
    fputs("usage: worker MODE REDIS_URL LOCK_NAME ARG...\n"
          "  mutex COUNTER_FILE SECTIONS RECORD_FILE\n"
          "  read|write EVENT_LOG SECTIONS RECORD_FILE\n"
          "  hold TOKEN | release TOKEN | wait READY_FILE\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 4) usage();
    const char *mode = argv[1], *url = argv[2], *name = argv[3];
    int nargs = argc - 4;
    char **args = argv + 4;

    if (strcmp(mode, "mutex") == 0) {
        if (nargs != 3) usage();
        long sections = parse_sections(args[1]);
        connect_client(url, 0);
        mode_mutex(name, args[0], sections, args[2]);
    } else if (strcmp(mode, "read") == 0 || strcmp(mode, "write") == 0) {
        if (nargs != 3) usage();
        long sections = parse_sections(args[1]);
        connect_client(url, 0);
        mode_rw(name, mode[0] == 'w', args[0], sections, args[2]);
    } else if (strcmp(mode, "hold") == 0) {
        if (nargs != 1) usage();
        connect_client(url, 0);
        mode_hold(name, args[0]);
    } else if (strcmp(mode, "release") == 0) {
        if (nargs != 1) usage();
        connect_client(url, 0);
        mode_release(name, args[0]);
    } else if (strcmp(mode, "wait") == 0) {
        if (nargs != 1) usage();
        connect_client(url, 1);
        mode_wait(name, args[0]);
    } else {
        fprintf(stderr, "worker(c): unknown mode \"%s\"\n", mode);
        usage();
    }
    return cleanup() ? 0 : 1;
}
