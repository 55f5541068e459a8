package redlock

// The C side of the callbacks: libredlock calls these C functions, which call the exported Go
// functions of callbacks.go. They live apart from callbacks.go because a file with //export may
// only declare C functions in its preamble, not define them.

/*
#include <stdint.h>
#include "redlock.h"

extern void redlockGoLockLost(void *, rl_lock_lost_event *);
extern void redlockGoContention(void *, rl_contention_alert *);

static void lost_trampoline(void *client, const rl_lock_lost_event *event) {
	redlockGoLockLost(client, (rl_lock_lost_event *)event);
}

static void contention_trampoline(void *client, const rl_contention_alert *alert) {
	redlockGoContention(client, (rl_contention_alert *)alert);
}

// The client id travels as the callbacks' user data: an integer, never a Go pointer.
static rl_status set_callbacks(rl_options options, uintptr_t client, int contention, rl_error *err) {
	rl_status status = rl_options_set_on_lock_lost(options, lost_trampoline, (void *)client, err);
	if (status != RL_OK || !contention) return status;
	return rl_options_set_on_contention(options, contention_trampoline, (void *)client, err);
}
*/
import "C"

func setCallbacks(options C.rl_options, client uintptr, contention bool) error {
	flag := C.int(0)
	if contention {
		flag = 1
	}
	return call("connect", func(e *C.rl_error) C.rl_status {
		return C.set_callbacks(options, C.uintptr_t(client), flag, e)
	})
}
