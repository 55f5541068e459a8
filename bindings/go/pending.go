package redlock

/*
#include "redlock.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// A waiting Acquire must not hold an OS thread each: a blocking cgo call would, and thousands of
// goroutines waiting at once would then mean thousands of threads (past debug.SetMaxThreads,
// Go ends the program). Up to MaxBlockingWaits acquires of the process wait in a blocking cgo
// call, which hands the lock over fastest (the library wakes the waiting thread itself); the
// others go through rl_lock_acquire_start: the first attempt runs in the cgo call, and a lock
// that is taken is waited for inside the library, whose callback closes a channel that the
// goroutine parks on, with no thread. (That way round costs a hand-over ~50 µs more: the
// library's thread calls into Go, which wakes a thread to run the goroutine.) The order in
// which waiters get the lock is Redis' queue either way.

// MaxBlockingWaits is how many acquires of the process may wait in a blocking call (each
// holding an OS thread) at once; the others wait without a thread.
const MaxBlockingWaits = 64

var blockingWaits = make(chan struct{}, MaxBlockingWaits)

// takeBlockingWait reserves a blocking wait if one is free (give it back with <-blockingWaits).
func takeBlockingWait() bool {
	select {
	case blockingWaits <- struct{}{}:
		return true
	default:
		return false
	}
}

// pendingSignals maps a pending acquire's id (the callback's user data: an integer, never a Go
// pointer) to the channel its goroutine waits on.
var (
	pendingSignals sync.Map // uintptr -> chan struct{}
	lastPendingID  atomic.Uintptr
)

// newPendingSignal registers a channel that the library's callback for id will close.
func newPendingSignal() (uintptr, chan struct{}) {
	id := lastPendingID.Add(1)
	done := make(chan struct{})
	pendingSignals.Store(id, done)
	return id, done
}

//export redlockGoPendingDone
func redlockGoPendingDone(id unsafe.Pointer) {
	if done, ok := pendingSignals.LoadAndDelete(uintptr(id)); ok {
		close(done.(chan struct{}))
	}
}

// acquireWaiting acquires like rl_lock_acquire_ex, parking the goroutine (not its thread) while
// the lock is taken.
func (l *Lock) acquireWaiting(owner *Owner, wait, lease C.int64_t, cancel C.rl_cancel, label *C.char,
	acquired *C.rl_acquired, hold *C.rl_hold) error {
	id, done := newPendingSignal()
	var pending C.rl_pending
	err := acquireStart(l, owner, wait, lease, cancel, label, id, acquired, hold, &pending)
	if err != nil || pending.id == 0 {
		// Nothing waits: no callback comes.
		pendingSignals.Delete(id)
		return err
	}
	defer C.rl_pending_free(&pending, nil)
	<-done // the callback always comes: on success, timeout, cancel or a closed client
	var finished C.bool
	return call("acquire", func(e *C.rl_error) C.rl_status {
		return C.rl_pending_wait(pending, 0, &finished, acquired, hold, e)
	})
}
