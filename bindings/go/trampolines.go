package redlock

// The C side of the callbacks: libredlock calls these C functions, which call the exported Go
// functions of callbacks.go. They live apart from callbacks.go because a file with //export may
// only declare C functions in its preamble, not define them.

/*
#include <stdint.h>
#include "redlock.h"

extern void redlockGoLockLost(void *, rl_lock_lost_event *);
extern void redlockGoContention(void *, rl_contention_alert *);
extern void redlockGoPendingDone(void *);
extern void redlockGoLog(rl_log_level, char *, char *);

static void lost_trampoline(void *client, const rl_lock_lost_event *event) {
	redlockGoLockLost(client, (rl_lock_lost_event *)event);
}

static void contention_trampoline(void *client, const rl_contention_alert *alert) {
	redlockGoContention(client, (rl_contention_alert *)alert);
}

static void pending_trampoline(void *id) {
	redlockGoPendingDone(id);
}

// The library's log lines (logs.go); the Go side keeps its state itself: no user data.
static void log_trampoline(void *user_data, rl_log_level level, const char *target,
                           const char *message) {
	(void)user_data;
	redlockGoLog(level, (char *)target, (char *)message);
}

static rl_status set_log_callback(int level, rl_error *err) {
	return rl_set_log_callback(level, level == RL_LOG_OFF ? NULL : log_trampoline, NULL, err);
}

// An acquire that waits without holding this thread; the waiter's id is the callback's user data.
static rl_status acquire_start(rl_lock lock, rl_owner owner, int64_t wait_ms, int64_t lease_ms,
                               rl_cancel cancel, const char *label, uintptr_t id,
                               rl_acquired *out, rl_hold *out_hold, rl_pending *out_pending,
                               rl_error *err) {
	return rl_lock_acquire_start(lock, owner, wait_ms, lease_ms, cancel, label, 0,
	                             pending_trampoline, (void *)id, out, out_hold, out_pending, err);
}

// The client id travels as the callbacks' user data: an integer, never a Go pointer.
static rl_status set_callbacks(rl_options options, uintptr_t client, int contention, rl_error *err) {
	rl_status status = rl_options_set_on_lock_lost(options, lost_trampoline, (void *)client, err);
	if (status != RL_OK || !contention) return status;
	return rl_options_set_on_contention(options, contention_trampoline, (void *)client, err);
}
*/
import "C"

// acquireStart starts an acquire through rl_lock_acquire_start (see pending.go).
func acquireStart(l *Lock, owner *Owner, wait, lease C.int64_t, cancel C.rl_cancel, label *C.char,
	id uintptr, acquired *C.rl_acquired, hold *C.rl_hold, pending *C.rl_pending) error {
	return call("acquire", func(e *C.rl_error) C.rl_status {
		return C.acquire_start(l.h, owner.h, wait, lease, cancel, label, C.uintptr_t(id), acquired, hold, pending, e)
	})
}

func setCallbacks(options C.rl_options, client uintptr, contention bool) error {
	flag := C.int(0)
	if contention {
		flag = 1
	}
	return call("connect", func(e *C.rl_error) C.rl_status {
		return C.set_callbacks(options, C.uintptr_t(client), flag, e)
	})
}

// setLogCallback asks the library for its log lines at level (an rl_log_level) or more severe,
// through log_trampoline; RL_LOG_OFF stops them.
func setLogCallback(level C.int) error {
	return call("set logger", func(e *C.rl_error) C.rl_status { return C.set_log_callback(level, e) })
}
