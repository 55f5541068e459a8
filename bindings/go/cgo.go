package redlock

/*
#cgo pkg-config: redlock
#include <stdlib.h>
#include "redlock.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

// call runs one C ABI function with an rl_error and turns its status into a Go error.
func call(op string, f func(e *C.rl_error) C.rl_status) error {
	yieldNow()
	var e C.rl_error
	status := f(&e)
	if status == C.RL_OK {
		return nil
	}
	message := ""
	if e.message != nil {
		message = C.GoString(e.message)
	}
	C.rl_error_free(&e)
	return newError(op, status, message)
}

// Go's sysmon preempts a goroutine that has run for 10 ms without passing through the
// scheduler; one that is inside a blocking cgo call then loses its P, waits for another thread
// to run it when the call returns, and sysmon polls every 20 µs for a while after. A goroutine
// that only makes lock calls (a worker loop: each call blocks in C, not in Go) never passes
// through the scheduler by itself, so it paid this over and over: ~3 context switches per
// acquire+release instead of 2, and sysmon awake. Yielding once every yieldEvery (by whichever
// goroutine calls first) keeps time slices fresh for the price of one runtime.Gosched. That
// price is not nothing: with a P idle, Gosched wakes another thread, which finds no work and
// sleeps again (two context switches). 5 ms keeps half of the 10 ms as a margin; against 2 ms
// it cut context switches per uncontended cycle from 2.64 to 2.43 and CPU by 6 % (A/B, 20 runs).
const yieldEvery = 5 * time.Millisecond

var (
	processStart = time.Now()
	lastYield    atomic.Int64 // time.Since(processStart) at the last yield, in ns
)

func yieldNow() {
	now := int64(time.Since(processStart))
	last := lastYield.Load()
	if now-last >= int64(yieldEvery) && lastYield.CompareAndSwap(last, now) {
		runtime.Gosched()
	}
}

// cString copies s for C (free it with freeCString); a NUL byte inside would silently cut the
// string short in C, so it is refused.
func cString(what, s string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, &Error{Op: what, Kind: ErrInvalidArgument, Message: what + " must not contain a NUL byte"}
	}
	return C.CString(s), nil
}

func freeCString(s *C.char) {
	C.free(unsafe.Pointer(s))
}

// millis converts a positive duration to whole milliseconds, rounding sub-millisecond values up
// (a 500µs lease means "as short as possible", not "zero"). Zero and negative durations are
// refused here: in C, -1 is a sentinel and must never come from a negative Go duration.
func millis(what string, d time.Duration) (C.int64_t, error) {
	if d <= 0 {
		return 0, &Error{Op: what, Kind: ErrInvalidArgument, Message: fmt.Sprintf("%s must be positive, got %v", what, d)}
	}
	ms := d.Milliseconds()
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	return C.int64_t(ms), nil
}

// liveObjects reports the library's live handles and strings (for leak checks).
func liveObjects() (handles, strs uint64, err error) {
	var h, s C.uint64_t
	err = call("live objects", func(e *C.rl_error) C.rl_status { return C.rl_live_objects(&h, &s, e) })
	return uint64(h), uint64(s), err
}

// cancelFor makes a cancel token that ctx's end triggers (a zero token when ctx never ends),
// and what frees it once the call is over.
func cancelFor(ctx context.Context, op string) (C.rl_cancel, func(), error) {
	var cancel C.rl_cancel
	if ctx.Done() == nil {
		return cancel, func() {}, nil
	}
	if err := call(op, func(e *C.rl_error) C.rl_status { return C.rl_cancel_new(&cancel, e) }); err != nil {
		return cancel, nil, err
	}
	// If the trigger runs after the free below, the library answers RL_INVALID_HANDLE, which is
	// harmless here.
	token := cancel
	stop := context.AfterFunc(ctx, func() { C.rl_cancel_trigger(token, nil) })
	return cancel, func() {
		stop()
		C.rl_cancel_free(&token, nil)
	}, nil
}
