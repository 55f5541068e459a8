/* Uncontended acquire+release cycles through the C ABI, to compare with the Rust blocking API
 * (ffi/examples/bench_blocking.rs) and Go (BenchmarkAcquireRelease) on the same redis-server.
 *
 * Usage: bench URL [cycles per round] [rounds]. Prints each round, then
 *   RESULT c median_us=<µs per cycle> cycles_per_s=<…> noio_ns=<ns per ABI call without I/O>
 * The last figure is the ABI's own cost (checks, handle look-up, panic guard) on a call that does
 * not reach Redis: what the C layer adds on top of the core. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "redlock.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void must(rl_status status, rl_error *err, const char *what) {
    if (status == RL_OK) return;
    fprintf(stderr, "%s: %s: %s\n", what, rl_status_name(status), err->message);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [cycles] [rounds]\n", argv[0]);
        return 2;
    }
    int cycles = argc > 2 ? atoi(argv[2]) : 2000;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (cycles <= 0 || rounds <= 0 || rounds > 100) return 2;
    rl_error err = {0};
    rl_client client = {0};
    rl_lock lock = {0};
    rl_owner owner = {0};
    must(rl_client_connect(argv[1], (rl_options){0}, &client, &err), &err, "connect");
    must(rl_client_lock(client, "bench:c", &lock, &err), &err, "lock");
    must(rl_owner_random(&owner, &err), &err, "owner");

    for (int i = 0; i < 200; i++) { /* warm-up: connections, scripts loaded, caches */
        must(rl_lock_acquire(lock, owner, 0, 30000, NULL, &err), &err, "acquire");
        must(rl_lock_release(lock, owner, NULL, &err), &err, "release");
    }
    double per_cycle[100];
    for (int r = 0; r < rounds; r++) {
        double started = now_us();
        for (int i = 0; i < cycles; i++) {
            must(rl_lock_acquire(lock, owner, 0, 30000, NULL, &err), &err, "acquire");
            must(rl_lock_release(lock, owner, NULL, &err), &err, "release");
        }
        per_cycle[r] = (now_us() - started) / cycles;
        printf("c: round %d: %.2f us/cycle\n", r + 1, per_cycle[r]);
    }
    qsort(per_cycle, (size_t)rounds, sizeof per_cycle[0], compare);
    double median = per_cycle[rounds / 2];

    /* The ABI's own cost: a call with a handle look-up, checks and the guard, but no I/O. */
    enum { CALLS = 1000000 };
    rl_mode mode;
    double started = now_us();
    for (int i = 0; i < CALLS; i++) must(rl_lock_mode(lock, &mode, &err), &err, "mode");
    double noio_ns = (now_us() - started) * 1000.0 / CALLS;

    printf("RESULT c median_us=%.2f cycles_per_s=%.0f noio_ns=%.0f\n", median, 1e6 / median,
           noio_ns);
    rl_owner_free(&owner, NULL);
    rl_lock_free(&lock, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
    return 0;
}
