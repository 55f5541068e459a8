package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Locker returns a sync.Locker over this view, for code that wants one. Each Lock call takes
// the lock with a fresh owner, so goroutines sharing the Locker exclude each other like with a
// sync.Mutex (on the read view, they read together), and Unlock may run in another goroutine.
// Lock waits as long as it takes, and holds are kept by the watchdog.
//
// sync.Locker has no way to return errors: Lock panics if the lock cannot be taken (closed
// client, Redis unreachable), and Unlock panics on an unlocked Locker or a failed release. After
// a release that Redis refused or did not answer, the Locker keeps the hold (it may still be
// held, and kept alive by the watchdog), so a recovered panic's Unlock may be called again;
// after a lost hold it does not. Use Acquire and Hold.Release to handle those as errors.
func (l *Lock) Locker() sync.Locker {
	return &locker{lock: l}
}

type locker struct {
	lock  *Lock
	mu    sync.Mutex
	holds []*Hold
}

func (l *locker) Lock() {
	hold, err := l.lock.Acquire(context.Background(), NewOwner())
	if err != nil {
		panic(fmt.Sprintf("redlock: Locker.Lock of %q: %v", l.lock.name, err))
	}
	l.mu.Lock()
	l.holds = append(l.holds, hold)
	l.mu.Unlock()
}

func (l *locker) Unlock() {
	l.mu.Lock()
	if len(l.holds) == 0 {
		l.mu.Unlock()
		panic(fmt.Sprintf("redlock: Locker.Unlock of unlocked lock %q", l.lock.name))
	}
	hold := l.holds[len(l.holds)-1]
	l.holds = l.holds[:len(l.holds)-1]
	l.mu.Unlock()
	if err := hold.Release(context.Background()); err != nil {
		if !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLockLost) {
			l.mu.Lock()
			l.holds = append(l.holds, hold)
			l.mu.Unlock()
		}
		panic(fmt.Sprintf("redlock: Locker.Unlock of %q: %v", l.lock.name, err))
	}
}
