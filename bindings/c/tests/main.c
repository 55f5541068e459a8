/* Runs every C test against one throwaway redis-server; the last line is "N passed, N failed". */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* tests/test_conformance.c: the shared scenarios of tests/conformance/scenarios.txt. */
extern const test_case conformance_tests[];

static const test_case *const suites[] = {exclusive_tests, rwlock_tests,    lease_tests,
                                          bad_input_tests, handle_tests,    thread_tests,
                                          pending_tests,   lifecycle_tests, conformance_tests,
                                          fork_tests,      log_tests};

/* tests/test_fork.c: fork tests that need a fresh process run these in an exec of this program. */
int fork_first_call_trial(unsigned delay);
int fork_at_thread_end_run(void);

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--fork-first-call") == 0)
        return fork_first_call_trial((unsigned)atoi(argv[2]));
    if (argc > 1 && strcmp(argv[1], "--fork-at-thread-end") == 0) return fork_at_thread_end_run();
    /* An optional argument runs only the tests whose name contains it; REDLOCK_TEST_SKIP in the
     * environment skips those whose name contains its value. */
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *skip = getenv("REDLOCK_TEST_SKIP");
    if (skip && !*skip) skip = NULL;
    if (!redis_start()) {
        fprintf(stderr, "cannot start redis-server\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int passed = 0, failed = 0;
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        for (const test_case *t = suites[s]; t->name; t++) {
            if (only && !strstr(t->name, only)) continue;
            if (skip && strstr(t->name, skip)) continue;
            test_failed = false;
            int64_t started = now_ms();
            t->run();
            printf("%s %s (%lld ms)\n", test_failed ? "FAIL" : "ok  ", t->name,
                   (long long)(now_ms() - started));
            fflush(stdout);
            if (test_failed) failed++;
            else passed++;
        }
    }
    redis_stop();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
