/* fork() while other threads of the parent are inside library calls: blocking acquires that wait
 * on a held lock, uncontended acquire/release loops that make and free hold handles, and a
 * watched hold the watchdog renews. Each child, under a watchdog timeout, must finish its first
 * calls (on the inherited client and on a new one), must not get what the parent holds, and must
 * not release it; the parent's calls must keep working and its replies must be its own. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"

enum { WORKERS = 4, CHILD_LIMIT_MS = 10000 };

/* FORK_COUNT in the environment overrides the number of forks (default 200). */
static int fork_count(void) {
    const char *env = getenv("FORK_COUNT");
    return env && atoi(env) > 0 ? atoi(env) : 200;
}

typedef struct fork_run {
    rl_lock own[WORKERS]; /* one uncontended name per worker */
    rl_lock shared;       /* contended by every worker: they wait on each other */
    atomic_bool stop;
    atomic_long rounds;
    atomic_int failures;
    char failure[256];
} fork_run;

typedef struct worker_arg {
    fork_run *run;
    int index;
} worker_arg;

static void worker_failed(fork_run *run, const char *what, rl_status status, const rl_error *err) {
    if (atomic_fetch_add(&run->failures, 1) == 0) {
        snprintf(run->failure, sizeof run->failure, "%s: %s (%s)", what, rl_status_name(status),
                 err && err->message ? err->message : "");
    }
}

static void *worker(void *arg) {
    worker_arg *w = arg;
    fork_run *run = w->run;
    rl_owner owner = {0};
    rl_error err = {0};
    if (rl_owner_random(&owner, NULL) != RL_OK) {
        atomic_fetch_add(&run->failures, 1);
        return NULL;
    }
    uint64_t last_token = 0;
    while (!atomic_load(&run->stop)) {
        rl_lock lock = (w->index % 2 == 0) ? run->own[w->index] : run->shared;
        rl_acquired got = {0};
        rl_hold hold = {0};
        rl_status st = rl_lock_acquire_ex(lock, owner, 10000, RL_LEASE_WATCHDOG, (rl_cancel){0},
                                          "fork-worker", &got, &hold, &err);
        if (st != RL_OK) {
            worker_failed(run, "acquire", st, &err);
            continue;
        }
        /* Replies are ours: a fresh hold, and (on our own name) a token newer than our last. */
        if (got.hold_count != 1) worker_failed(run, "acquire gave hold_count != 1", st, NULL);
        if (w->index % 2 == 0) {
            if (got.fencing_token <= last_token)
                worker_failed(run, "fencing token did not increase", st, NULL);
            last_token = got.fencing_token;
        }
        rl_hold_free(&hold, NULL);
        uint32_t remaining = 99;
        st = rl_lock_release(lock, owner, &remaining, &err);
        if (st != RL_OK) worker_failed(run, "release", st, &err);
        else if (remaining != 0) worker_failed(run, "release left holds", st, NULL);
        atomic_fetch_add(&run->rounds, 1);
    }
    rl_error_free(&err);
    rl_owner_free(&owner, NULL);
    return NULL;
}

/* What the child does; returns its exit code (0: fine) and reports progress on `progress`. */
static int child_main(int progress, rl_lock held, rl_owner parent_owner, const char *held_name,
                      const char *child_name) {
    rl_error err = {0};
    char step = 0;
#define STEP(n)                                                                   \
    do {                                                                          \
        step = (char)(n);                                                         \
        if (write(progress, &step, 1) != 1) return 90;                            \
    } while (0)
    rl_owner mine = {0};
    STEP(1);
    if (rl_owner_random(&mine, NULL) != RL_OK) return 11;
    STEP(2);
    /* Inherited client: the parent's hold excludes us. */
    rl_status st = rl_lock_acquire(held, mine, 0, 5000, NULL, &err);
    if (st != RL_TIMEOUT) return 12;
    STEP(3);
    bool held_by = false;
    if (rl_lock_is_held_by(held, parent_owner, &held_by, &err) != RL_OK || !held_by) return 13;
    STEP(4);
    rl_client fresh = {0};
    if (rl_client_connect(redis_url(), (rl_options){0}, &fresh, &err) != RL_OK) return 14;
    STEP(5);
    rl_lock fresh_held = {0}, fresh_own = {0};
    if (rl_client_lock(fresh, held_name, &fresh_held, &err) != RL_OK) return 15;
    if (rl_client_lock(fresh, child_name, &fresh_own, &err) != RL_OK) return 15;
    STEP(6);
    st = rl_lock_acquire(fresh_held, mine, 0, 5000, NULL, &err);
    if (st != RL_TIMEOUT) return 16;
    STEP(7);
    rl_acquired got = {0};
    if (rl_lock_acquire(fresh_own, mine, 1000, 5000, &got, &err) != RL_OK) return 17;
    uint32_t remaining = 9;
    if (rl_lock_release(fresh_own, mine, &remaining, &err) != RL_OK || remaining != 0) return 18;
    STEP(8);
    /* The child must not be able to release the parent's hold without its token... */
    st = rl_lock_release(held, mine, NULL, &err);
    if (st != RL_NOT_HELD) return 19;
    STEP(9);
    return 0;
#undef STEP
}

static const char *step_names[] = {
    "before any call",           "rl_owner_random",
    "acquire on inherited client", "is_held_by on inherited client",
    "rl_client_connect (new client)", "rl_client_lock on new client",
    "acquire on new client",     "acquire/release own name on new client",
    "release of parent's lock",  "done",
};

static void dump_stacks(pid_t pid) {
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "gdb -p %d -batch -ex 'thread apply all bt 25' 2>/dev/null | "
             "grep -E '^(Thread|#)' | head -60 >&2",
             (int)pid);
    if (system(cmd) != 0) fprintf(stderr, "(gdb failed)\n");
}

static void fork_while_other_threads_are_inside_calls(void) {
    rl_error err = {0};
    rl_client client = connect_default();
    fork_run run = {0};
    worker_arg args[WORKERS];
    pthread_t threads[WORKERS];
    int started = 0;
    rl_lock held = {0};
    rl_owner parent_owner = {0};
    rl_hold parent_hold = {0};
    char held_name[128];
    snprintf(held_name, sizeof held_name, "%s", unique_name("fork-held"));
    TRY(rl_client_lock(client, held_name, &held, &err), &err);
    TRY(rl_owner_random(&parent_owner, &err), &err);
    TRY(rl_lock_acquire_ex(held, parent_owner, 0, RL_LEASE_WATCHDOG, (rl_cancel){0}, "parent",
                           NULL, &parent_hold, &err),
        &err);
    for (int i = 0; i < WORKERS; i++) TRY(rl_client_lock(client, unique_name("fork-own"), &run.own[i], &err), &err);
    TRY(rl_client_lock(client, unique_name("fork-shared"), &run.shared, &err), &err);
    for (int i = 0; i < WORKERS; i++) {
        args[i] = (worker_arg){&run, i};
        REQUIRE(pthread_create(&threads[i], NULL, worker, &args[i]) == 0);
        started++;
    }
    sleep_ms(100);

    int hangs = 0, bad = 0;
    const int forks = fork_count();
    for (int f = 0; f < forks; f++) {
        char child_name[128];
        snprintf(child_name, sizeof child_name, "%s", unique_name("fork-child"));
        int pipefd[2];
        REQUIRE(pipe(pipefd) == 0);
        if (f % 4) sleep_ms(f % 3); /* land the fork at varied points of the workers' calls */
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(pipefd[0]);
            _exit(child_main(pipefd[1], held, parent_owner, held_name, child_name));
        }
        close(pipefd[1]);
        fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
        int64_t deadline = now_ms() + CHILD_LIMIT_MS;
        int status = 0;
        pid_t done = 0;
        while ((done = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < deadline) sleep_ms(5);
        char steps[16];
        ssize_t n = read(pipefd[0], steps, sizeof steps); /* child closed or killed: no block */
        if (done == 0) {
            hangs++;
            fprintf(stderr, "fork %d: child %d hung in step \"%s\"; its threads:\n", f,
                    (int)pid, n > 0 ? step_names[(int)steps[n - 1]] : step_names[0]);
            if (hangs <= 2) dump_stacks(pid);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
            fprintf(stderr, "fork %d: child failed (status %#x) in step \"%s\"\n", f, status,
                    n > 0 ? step_names[(int)steps[n - 1]] : step_names[0]);
        }
        close(pipefd[0]);
    }
    atomic_store(&run.stop, true);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    started = 0;
    fprintf(stderr, "forks: %d, hung children: %d, failed children: %d, parent rounds: %ld\n",
            forks, hangs, bad, atomic_load(&run.rounds));
    if (atomic_load(&run.failures) != 0) fprintf(stderr, "parent worker: %s\n", run.failure);
    CHECK(hangs == 0);
    CHECK(bad == 0);
    CHECK(atomic_load(&run.failures) == 0);
    /* The parent still holds its lock, watched, not lost. */
    uint32_t count = 0;
    CHECK_OK(rl_lock_hold_count(held, parent_owner, &count, &err), &err);
    CHECK(count == 1);
    bool lost = true;
    CHECK_OK(rl_hold_is_lost(parent_hold, &lost, &err), &err);
    CHECK(!lost);
    uint32_t remaining = 9;
    CHECK_OK(rl_lock_release(held, parent_owner, &remaining, &err), &err);
done:
    atomic_store(&run.stop, true);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    rl_hold_free(&parent_hold, NULL);
    for (int i = 0; i < WORKERS; i++) rl_lock_free(&run.own[i], NULL);
    rl_lock_free(&run.shared, NULL);
    rl_lock_free(&held, NULL);
    rl_owner_free(&parent_owner, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}


/* The same, narrowed to the handle tables: two threads of the parent look handles up (the
 * cheapest calls there are: no Redis) while the parent forks; each child makes a new lock handle
 * and a hold handle, which writes to the tables its parent's threads were reading. */
typedef struct lookup_run {
    rl_lock lock;
    rl_hold hold;
    atomic_bool stop;
} lookup_run;

static void *look_up_handles(void *arg) {
    lookup_run *run = arg;
    while (!atomic_load(&run->stop)) {
        rl_mode mode;
        uint32_t count;
        rl_lock_mode(run->lock, &mode, NULL);
        rl_hold_count(run->hold, &count, NULL);
    }
    return NULL;
}

static void fork_while_threads_look_up_handles(void) {
    enum { LOOKUP_FORKS = 50, LOOKUP_LIMIT_MS = 3000 };
    rl_error err = {0};
    rl_client client = connect_default();
    lookup_run run = {0};
    rl_owner owner = {0};
    pthread_t threads[2];
    int started = 0;
    char name[128];
    snprintf(name, sizeof name, "%s", unique_name("fork-lookup"));
    TRY(rl_client_lock(client, name, &run.lock, &err), &err);
    TRY(rl_owner_random(&owner, &err), &err);
    TRY(rl_lock_acquire_ex(run.lock, owner, 0, 30000, (rl_cancel){0}, NULL, NULL, &run.hold, &err),
        &err);
    for (int i = 0; i < 2; i++) {
        REQUIRE(pthread_create(&threads[i], NULL, look_up_handles, &run) == 0);
        started++;
    }
    sleep_ms(20);
    int hangs = 0, bad = 0;
    for (int f = 0; f < LOOKUP_FORKS; f++) {
        char child_name[128];
        snprintf(child_name, sizeof child_name, "%s", unique_name("fork-lookup-child"));
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            /* Child: a new lock handle on the inherited client, then an acquire with a hold. */
            rl_lock mine = {0};
            rl_owner me = {0};
            rl_hold hold = {0};
            if (rl_client_lock(client, child_name, &mine, NULL) != RL_OK) _exit(21);
            if (rl_owner_random(&me, NULL) != RL_OK) _exit(22);
            if (rl_lock_acquire_ex(mine, me, 0, 5000, (rl_cancel){0}, NULL, NULL, &hold, NULL) !=
                RL_OK)
                _exit(23);
            _exit(0);
        }
        int64_t deadline = now_ms() + LOOKUP_LIMIT_MS;
        int status = 0;
        pid_t done = 0;
        while ((done = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < deadline) sleep_ms(5);
        if (done == 0) {
            hangs++;
            if (hangs == 1) {
                fprintf(stderr, "fork %d: child %d hung; its threads:\n", f, (int)pid);
                dump_stacks(pid);
            }
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
        }
    }
    fprintf(stderr, "forks: %d, hung children: %d, failed children: %d\n", LOOKUP_FORKS, hangs,
            bad);
    CHECK(hangs == 0);
    CHECK(bad == 0);
done:
    atomic_store(&run.stop, true);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    if (run.hold.id) rl_lock_release(run.lock, owner, NULL, NULL);
    rl_hold_free(&run.hold, NULL);
    rl_lock_free(&run.lock, NULL);
    rl_owner_free(&owner, NULL);
    rl_client_free(&client, NULL);
    rl_error_free(&err);
}

/* Waits up to limit_ms for child pid; true when it exited with status 0. A child still running
 * then is killed (and reported as hung). */
static bool child_ends_well(pid_t pid, int64_t limit_ms, const char *what) {
    int64_t deadline = now_ms() + limit_ms;
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < deadline) sleep_ms(5);
    if (done == 0) {
        fprintf(stderr, "%s: child %d hung\n", what, (int)pid);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: child %d ended with status %#x\n", what, (int)pid, status);
        return false;
    }
    return true;
}

/* fork() while a library thread runs one of the client's C callbacks (a contention alert that
 * takes a moment): the child's first call, closing the inherited client, must not wait for the
 * parent's callback, which does not run in the child. */
static atomic_int callback_running, callback_may_end;

static void slow_contention_alert(void *user_data, const rl_contention_alert *alert) {
    (void)user_data;
    (void)alert;
    atomic_store(&callback_running, 1);
    while (!atomic_load(&callback_may_end)) sleep_ms(1);
}

typedef struct waiting_acquire {
    rl_lock lock;
    rl_owner owner;
} waiting_acquire;

static void *wait_for_the_lock(void *arg) {
    waiting_acquire *w = arg;
    rl_acquired got = {0};
    rl_lock_acquire(w->lock, w->owner, 3000, 5000, &got, NULL);
    return NULL;
}

static void fork_while_a_callback_runs(void) {
    rl_error err = {0};
    rl_options options = {0};
    rl_client client = {0};
    rl_owner holder = {0};
    waiting_acquire waiter = {0};
    pthread_t thread;
    bool started = false;
    atomic_store(&callback_running, 0);
    atomic_store(&callback_may_end, 0);
    TRY(rl_options_new(&options, &err), &err);
    TRY(rl_options_set_contention_alert(options, -1, 1, &err), &err);
    TRY(rl_options_set_on_contention(options, slow_contention_alert, NULL, &err), &err);
    TRY(rl_client_connect(redis_url(), options, &client, &err), &err);
    TRY(rl_client_lock(client, unique_name("fork-callback"), &waiter.lock, &err), &err);
    TRY(rl_owner_random(&holder, &err), &err);
    TRY(rl_owner_random(&waiter.owner, &err), &err);
    rl_acquired got = {0};
    TRY(rl_lock_acquire(waiter.lock, holder, 0, 10000, &got, &err), &err);
    REQUIRE(pthread_create(&thread, NULL, wait_for_the_lock, &waiter) == 0);
    started = true;
    int64_t deadline = now_ms() + 5000;
    while (!atomic_load(&callback_running) && now_ms() < deadline) sleep_ms(1);
    REQUIRE(atomic_load(&callback_running));
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(rl_client_close(client, NULL) == RL_OK ? 0 : 1);
    bool closed = child_ends_well(pid, 3000, "closing the inherited client");
    atomic_store(&callback_may_end, 1);
    CHECK(closed);
done:
    atomic_store(&callback_may_end, 1);
    if (started) pthread_join(thread, NULL);
    rl_lock_release(waiter.lock, holder, NULL, NULL);
    rl_lock_free(&waiter.lock, NULL);
    rl_owner_free(&holder, NULL);
    rl_owner_free(&waiter.owner, NULL);
    rl_client_free(&client, NULL);
    rl_options_free(&options, NULL);
    rl_error_free(&err);
}

/* fork() from a thread that is ending (a pthread key destructor, after the thread's Rust
 * thread-locals are gone), in a process that uses the library: the process goes on. */
static pthread_key_t fork_at_thread_end_key;

static void fork_and_reap(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(pid, NULL, 0);
}

static void fork_at_thread_end(void *value) {
    (void)value;
    fork_and_reap();
}

static void *fork_then_end(void *arg) {
    (void)arg;
    fork_and_reap(); /* this thread's own state for forks is made here */
    pthread_setspecific(fork_at_thread_end_key, (void *)1);
    return NULL;
}

/* One run of fork_from_a_thread_that_is_ending, in a fresh exec of this program (main.c:
 * --fork-at-thread-end): the process uses the library, then a thread forks and ends. */
int fork_at_thread_end_run(void);

int fork_at_thread_end_run(void) {
    rl_options options = {0};
    if (rl_options_new(&options, NULL) != RL_OK) return 2;
    pthread_t thread;
    if (pthread_key_create(&fork_at_thread_end_key, fork_at_thread_end) != 0) return 3;
    if (pthread_create(&thread, NULL, fork_then_end, NULL) != 0) return 4;
    pthread_join(thread, NULL);
    rl_options_free(&options, NULL);
    return 0;
}

static void fork_from_a_thread_that_is_ending(void) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "redlock_test", "--fork-at-thread-end", (char *)NULL);
        _exit(5);
    }
    CHECK(child_ends_well(pid, 10000, "a fork from a pthread key destructor"));
}

/* fork() while another thread makes a process's first library call: each trial is a fresh exec
 * of this program (main.c: --fork-first-call DELAY), which forks at a varying moment while a
 * thread makes its first call; the grandchild's own first call must not hang. */
int fork_first_call_trial(unsigned delay);

static atomic_int first_call_go;

static void *make_the_first_call(void *arg) {
    (void)arg;
    while (!atomic_load(&first_call_go)) {
    }
    rl_options options = {0};
    if (rl_options_new(&options, NULL) != RL_OK) abort();
    rl_options_free(&options, NULL);
    return NULL;
}

int fork_first_call_trial(unsigned delay) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, make_the_first_call, NULL) != 0) return 3;
    atomic_store(&first_call_go, 1);
    for (volatile unsigned i = 0; i < delay; i++) {
    }
    pid_t pid = fork();
    if (pid == 0) {
        alarm(3);
        rl_options options = {0};
        _exit(rl_options_new(&options, NULL) == RL_OK ? 0 : 2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    pthread_join(thread, NULL);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return 1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 2;
}

static void fork_during_a_process_first_call(void) {
    enum { TRIALS = 1000 };
    int hung = 0, other = 0;
    srand(12345);
    for (int i = 0; i < TRIALS; i++) {
        char delay[16];
        snprintf(delay, sizeof delay, "%d", rand() % 20000);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            execl("/proc/self/exe", "redlock_test", "--fork-first-call", delay, (char *)NULL);
            _exit(4);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 5;
        if (code == 1) hung++;
        else if (code != 0) other++;
    }
    fprintf(stderr, "trials: %d, hung grandchildren: %d, other failures: %d\n", TRIALS, hung,
            other);
    CHECK(hung == 0);
    CHECK(other == 0);
}

const test_case fork_tests[] = {
    {"fork_while_other_threads_are_inside_calls", fork_while_other_threads_are_inside_calls},
    {"fork_while_threads_look_up_handles", fork_while_threads_look_up_handles},
    {"fork_while_a_callback_runs", fork_while_a_callback_runs},
    {"fork_from_a_thread_that_is_ending", fork_from_a_thread_that_is_ending},
    {"fork_during_a_process_first_call", fork_during_a_process_first_call},
    {NULL, NULL},
};
