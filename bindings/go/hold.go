package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Hold is one successful acquisition. Release it (once) when done; the lock itself stays
// reentrant, so each Acquire of an owner needs its own release.
type Hold struct {
	lock         *Lock
	owner        *Owner
	fencingToken uint64
	holdCount    int
	lost         *lostSignal // nil for a fixed lease: nothing watches those holds
	released     atomic.Bool
}

// FencingToken is the hold's fencing token: for one name, strictly increasing over new write
// (and exclusive) holds; a re-entry gets the token of the hold it re-enters. Hand it to the
// resource the lock guards, which can then refuse writes with an older token.
func (h *Hold) FencingToken() uint64 { return h.fencingToken }

// HoldCount is the owner's hold count in this view right after this acquisition.
func (h *Hold) HoldCount() int { return h.holdCount }

// Owner is the owner that holds it.
func (h *Hold) Owner() *Owner { return h.owner }

// Lock is the lock view it was taken on.
func (h *Hold) Lock() *Lock { return h.lock }

// Release releases this hold. A second Release of the same Hold is ErrNotHeld and changes
// nothing (the owner's other, reentrant holds stay). ErrLockLost when the watchdog kept the hold
// and Redis no longer has it. A hold that has ended (expired, force-unlocked) is ErrNotHeld or
// ErrLockLost even when the owner holds the lock again by now: the owner's newer hold, taken
// after this one by another goroutine sharing the owner, stays (unlike Lock.Release, which
// releases whatever hold the owner has). It runs even when ctx has ended (see Lock.Release).
func (h *Hold) Release(ctx context.Context) error {
	if !h.released.CompareAndSwap(false, true) {
		return &Error{Op: "release", Kind: ErrNotHeld, Message: "this hold was already released"}
	}
	// This hold alone (by its fencing token): when it has ended, the owner's newer hold, taken
	// after it by another goroutine sharing the owner, stays.
	if _, err := h.lock.release(h.owner, &h.fencingToken); err != nil {
		// Only Redis' own "not held" (or "lost") settles it; after a connection error or a
		// closed client the hold may still be in Redis, so a retry must be possible.
		if !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLockLost) {
			h.released.Store(false)
		}
		return err
	}
	return nil
}

// Extend sets the hold's lease to lease from now (see Lock.Extend).
func (h *Hold) Extend(ctx context.Context, lease time.Duration) error {
	if h.released.Load() {
		return &Error{Op: "extend", Kind: ErrNotHeld, Message: "this hold was already released"}
	}
	return h.lock.Extend(ctx, h.owner, lease)
}

// Lost is closed when the client finds the hold gone from Redis (it expired during an outage,
// or was force-unlocked; found by the watchdog, a release, or the owner's next acquire of the
// name), and when the client is closed (nothing keeps the hold any more): stop relying on the
// lock. For a hold with a fixed lease (WithLease) nothing watches it, and Lost returns nil, a
// channel that never delivers.
func (h *Hold) Lost() <-chan struct{} {
	if h.lost == nil {
		return nil
	}
	return h.lost.ch
}
