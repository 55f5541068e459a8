package redlock

/*
#include <stdlib.h>
#include "redlock.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"time"
)

// Mode is the view of a lock name: shared (Read) or exclusive (Write, also the exclusive lock).
type Mode int

const (
	// Read is the shared view: any number of owners at once, no writer meanwhile.
	Read Mode = C.RL_MODE_READ
	// Write is the exclusive view: one owner, nobody else reading or writing.
	Write Mode = C.RL_MODE_WRITE
)

func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "none"
}

// Lock is one view of a lock name: the exclusive lock (Client.Lock) or the read or write view of
// a read/write lock. It holds no Redis state: the holds belong to owners. Safe for concurrent
// use.
type Lock struct {
	client *Client
	h      C.rl_lock
	name   string
	mode   Mode
}

// ReadWriteLock is a read/write lock: two views of one name.
type ReadWriteLock struct {
	read, write *Lock
}

// Read is the shared view: any number of owners may read at once; no one reads while someone
// writes, and once a writer waits, new readers queue behind it.
func (rw *ReadWriteLock) Read() *Lock { return rw.read }

// Write is the exclusive view. Its owner may also read (downgrade: write, read, release the
// write). A reader asking to write gets ErrUpgradeNotAllowed at once.
func (rw *ReadWriteLock) Write() *Lock { return rw.write }

func newLock(c *Client, h C.rl_lock, name string, mode Mode) *Lock {
	l := &Lock{client: c, h: h, name: name, mode: mode}
	runtime.AddCleanup(l, freeLock, uint64(h.id))
	return l
}

func freeLock(id uint64) {
	h := C.rl_lock{id: C.uint64_t(id)}
	C.rl_lock_free(&h, nil)
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// Mode is the lock's view.
func (l *Lock) Mode() Mode { return l.mode }

// AcquireOption changes one acquire.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	lease time.Duration // 0: the watchdog keeps the hold until released
	label *string       // nil: the core stores the thread's name
}

// WithLease gives the hold a fixed lease: Redis frees it after d unless extended (a
// sub-millisecond d counts as 1ms; a negative d is ErrInvalidArgument). Without it, or with 0,
// the client's watchdog keeps the hold alive until it is released.
func WithLease(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.lease = d }
}

// WithLabel stores a description of the holder with the hold (a goroutine's task, a request
// id; at most 256 bytes kept), shown by Inspect and contention alerts. An empty label is
// ErrInvalidArgument.
func WithLabel(label string) AcquireOption {
	return func(o *acquireOptions) { o.label = &label }
}

// Acquire takes the lock for owner, waiting while ctx allows: ctx's deadline is the wait (none:
// as long as it takes), and cancelling ctx ends the wait at once, leaving nothing in Redis.
// Reentrant: the owner may acquire again, and must release as many times.
//
// Errors: ErrTimeout when the deadline passes first (it also matches
// context.DeadlineExceeded), ErrCanceled when ctx is cancelled (also context.Canceled),
// ErrUpgradeNotAllowed when a reader asks for the write view.
func (l *Lock) Acquire(ctx context.Context, owner *Owner, opts ...AcquireOption) (*Hold, error) {
	wait := C.int64_t(C.RL_WAIT_FOREVER)
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			// Passed, though ctx may not say so yet: it is the context's error all the same.
			return nil, contextError("acquire", context.DeadlineExceeded)
		}
		// Rounded up: a deadline under a millisecond away is still a wait (0 would be a
		// TryAcquire, whose ErrTimeout is not the deadline's). Not as left + 1ms - 1, which
		// overflows for context.WithTimeout(ctx, math.MaxInt64), a deadline ~292 years away.
		wait = C.int64_t(left / time.Millisecond)
		if left%time.Millisecond != 0 {
			wait++
		}
	}
	return l.acquire(ctx, owner, wait, opts)
}

// TryAcquire makes one attempt: ErrTimeout at once when someone else holds the lock.
func (l *Lock) TryAcquire(ctx context.Context, owner *Owner, opts ...AcquireOption) (*Hold, error) {
	return l.acquire(ctx, owner, 0, opts)
}

func (l *Lock) acquire(ctx context.Context, owner *Owner, wait C.int64_t, opts []AcquireOption) (*Hold, error) {
	if owner == nil {
		return nil, &Error{Op: "acquire", Kind: ErrInvalidArgument, Message: "owner must not be nil"}
	}
	if err := checkContext(ctx, "acquire"); err != nil {
		return nil, err
	}
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	lease := C.int64_t(C.RL_LEASE_WATCHDOG)
	if o.lease != 0 {
		ms, err := millis("lease", o.lease)
		if err != nil {
			return nil, err
		}
		lease = ms
	}
	var label *C.char
	if o.label != nil {
		var err error
		if label, err = cString("label", *o.label); err != nil {
			return nil, err
		}
		defer freeCString(label)
	}
	cancel, release, err := cancelFor(ctx, "acquire")
	if err != nil {
		return nil, err
	}
	defer release()

	var acquired C.rl_acquired
	var hold C.rl_hold
	watched := lease == C.RL_LEASE_WATCHDOG
	holdOut := (*C.rl_hold)(nil)
	if watched {
		holdOut = &hold
	}
	if wait == 0 || takeBlockingWait() {
		err = call("acquire", func(e *C.rl_error) C.rl_status {
			return C.rl_lock_acquire_ex(l.h, owner.h, wait, lease, cancel, label, &acquired, holdOut, e)
		})
		if wait != 0 {
			<-blockingWaits
		}
	} else {
		err = l.acquireWaiting(owner, wait, lease, cancel, label, &acquired, holdOut)
	}
	runtime.KeepAlive(l)
	runtime.KeepAlive(owner)
	if err != nil {
		return nil, l.waitError(ctx, err, wait)
	}
	h := &Hold{lock: l, owner: owner, fencingToken: uint64(acquired.fencing_token), holdCount: int(acquired.hold_count)}
	if watched {
		h.lost = l.client.hooks.track(l.key(owner), h.fencingToken, hold)
	}
	return h, nil
}

// waitError gives a wait's failure the context's reason when the context ended it.
func (l *Lock) waitError(ctx context.Context, err error, wait C.int64_t) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(e.Kind, ErrCanceled) && ctx.Err() != nil:
		return contextError("acquire", ctx.Err())
	case errors.Is(e.Kind, ErrTimeout) && wait > 0:
		// The wait was the context's deadline.
		e.cause = context.DeadlineExceeded
	}
	return e
}

func (l *Lock) key(owner *Owner) lostKey { return lostKey{l.name, l.mode, owner.token} }

// Release releases one hold of owner (presenting the token is enough: the hold may have been
// taken by another instance) and returns how many holds the owner still has in this view.
// ErrNotHeld when the owner does not hold it (nothing changes); ErrLockLost when this client's
// watchdog kept it and Redis no longer has it.
//
// A release runs even when ctx has already ended: `defer hold.Release(ctx)` with a request's
// context must not leave the lock held (the watchdog would keep it) because the request was
// cancelled. A release cannot be stopped halfway anyway; the client's command timeout bounds it.
func (l *Lock) Release(ctx context.Context, owner *Owner) (remaining int, err error) {
	if owner == nil {
		return 0, &Error{Op: "release", Kind: ErrInvalidArgument, Message: "owner must not be nil"}
	}
	return l.release(owner, nil)
}

// release releases one hold of owner, or its hold with the fencing token *fence alone.
func (l *Lock) release(owner *Owner, fence *uint64) (remaining int, err error) {
	var left C.uint32_t
	err = call("release", func(e *C.rl_error) C.rl_status {
		if fence != nil {
			return C.rl_lock_release_fenced(l.h, owner.h, C.uint64_t(*fence), &left, e)
		}
		return C.rl_lock_release(l.h, owner.h, &left, e)
	})
	runtime.KeepAlive(l)
	runtime.KeepAlive(owner)
	if errors.Is(err, ErrLockLost) || errors.Is(err, ErrNotHeld) || err == nil && left == 0 {
		l.client.hooks.settleKey(l.key(owner))
	}
	return int(left), err
}

// Extend sets the lease of owner's hold to lease from now. A hold the watchdog keeps stays
// kept. ErrNotHeld when the owner does not hold it.
func (l *Lock) Extend(ctx context.Context, owner *Owner, lease time.Duration) error {
	if owner == nil {
		return &Error{Op: "extend", Kind: ErrInvalidArgument, Message: "owner must not be nil"}
	}
	if err := checkContext(ctx, "extend"); err != nil {
		return err
	}
	ms, err := millis("lease", lease)
	if err != nil {
		return err
	}
	err = call("extend", func(e *C.rl_error) C.rl_status { return C.rl_lock_extend(l.h, owner.h, ms, e) })
	runtime.KeepAlive(l)
	runtime.KeepAlive(owner)
	return err
}

// IsLocked reports whether anyone holds this view (write view: a writer; read view: a reader).
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	if err := checkContext(ctx, "is locked"); err != nil {
		return false, err
	}
	var out C.bool
	err := call("is locked", func(e *C.rl_error) C.rl_status { return C.rl_lock_is_locked(l.h, &out, e) })
	runtime.KeepAlive(l)
	return bool(out), err
}

// IsHeldBy reports whether owner holds this view.
func (l *Lock) IsHeldBy(ctx context.Context, owner *Owner) (bool, error) {
	count, err := l.HoldCount(ctx, owner)
	return count > 0, err
}

// HoldCount is how many times owner holds this view (0 when not at all).
func (l *Lock) HoldCount(ctx context.Context, owner *Owner) (int, error) {
	if owner == nil {
		return 0, &Error{Op: "hold count", Kind: ErrInvalidArgument, Message: "owner must not be nil"}
	}
	if err := checkContext(ctx, "hold count"); err != nil {
		return 0, err
	}
	var out C.uint32_t
	err := call("hold count", func(e *C.rl_error) C.rl_status { return C.rl_lock_hold_count(l.h, owner.h, &out, e) })
	runtime.KeepAlive(l)
	runtime.KeepAlive(owner)
	return int(out), err
}

// Inspect returns a snapshot of the whole name (both views): mode, holders, leases, waiters and
// the last fencing token.
func (l *Lock) Inspect(ctx context.Context) (*LockInfo, error) {
	if err := checkContext(ctx, "inspect"); err != nil {
		return nil, err
	}
	var out *C.char
	err := call("inspect", func(e *C.rl_error) C.rl_status { return C.rl_lock_inspect(l.h, &out, e) })
	runtime.KeepAlive(l)
	if err != nil {
		return nil, err
	}
	defer C.rl_string_free(out)
	return parseLockInfo(C.GoString(out))
}

// ForceUnlock clears the name whoever holds it (both views) and wakes every waiter; it reports
// whether it was held. This client's own watched holds of the name are reported lost at once;
// other clients find out at their next renewal.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := checkContext(ctx, "force unlock"); err != nil {
		return false, err
	}
	var held C.bool
	err := call("force unlock", func(e *C.rl_error) C.rl_status { return C.rl_lock_force_unlock(l.h, &held, e) })
	runtime.KeepAlive(l)
	return bool(held), err
}
