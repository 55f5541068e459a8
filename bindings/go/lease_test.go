package redlock

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestTheWatchdogKeepsAHoldPastThreeLeases(t *testing.T) {
	c := connect(t, WithDefaultLease(300*time.Millisecond))
	lock := mustLock(t, c, uniqueName(t))
	owner := NewOwner()
	hold := mustAcquire(t, lock, owner) // no lease: the watchdog renews every 100ms
	time.Sleep(time.Second)
	if held, err := lock.IsHeldBy(bg, owner); err != nil || !held {
		t.Fatalf("held %v %v", held, err)
	}
	select {
	case <-hold.Lost():
		t.Fatal("not lost")
	default:
	}
	if err := hold.Release(bg); err != nil {
		t.Fatal(err)
	}
}

func TestALeaseEndsTheHoldAndExtendMovesIt(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	owner := NewOwner()
	hold := mustAcquire(t, lock, owner, WithLease(200*time.Millisecond))
	if hold.Lost() != nil {
		t.Fatal("a fixed-lease hold is not watched: Lost must be nil")
	}
	if err := hold.Extend(bg, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if held := mustOK(t)(lock.IsHeldBy(bg, owner)); !held {
		t.Fatal("extended: still held")
	}
	if err := hold.Extend(bg, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if held := mustOK(t)(lock.IsHeldBy(bg, owner)); held {
		t.Fatal("expired: no longer held")
	}
	other := mustAcquire(t, lock, NewOwner(), WithLease(time.Second)) // taken at once
	wantErr(t, hold.Release(bg), ErrNotHeld)
	other.Release(bg)
}

// lostEvents records the lock-lost events of a client.
type lostEvents struct {
	mu     sync.Mutex
	events []LockLostEvent
}

func (l *lostEvents) record(e LockLostEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// wait waits (2 s at most) until n events were reported, and returns those reported by then.
func (l *lostEvents) wait(n int) []LockLostEvent {
	eventually(2*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.events) == n
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// wantOne waits until one event was reported, and checks that it is want.
func (l *lostEvents) wantOne(t *testing.T, want LockLostEvent) {
	t.Helper()
	if events := l.wait(1); len(events) != 1 || events[0] != want {
		t.Fatalf("events: %+v", events)
	}
}

// forceUnlockHeld clears name through admin, which must find it held.
func forceUnlockHeld(t *testing.T, admin *Client, name string) {
	t.Helper()
	if held := mustOK(t)(admin.ForceUnlock(bg, name)); !held {
		t.Fatal("force unlock: it was held")
	}
}

func TestForceUnlockMakesTheHolderLoseItsHoldAndSignalsIt(t *testing.T) {
	var lost lostEvents
	c := connect(t, WithDefaultLease(300*time.Millisecond), OnLockLost(lost.record))
	admin := connect(t)
	name := uniqueName(t)
	lock := mustLock(t, c, name)
	owner := NewOwner()
	hold := mustAcquire(t, lock, owner)
	forceUnlockHeld(t, admin, name)
	select {
	case <-hold.Lost(): // the holder's watchdog notices at its next renewal
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() was not closed")
	}
	lost.wantOne(t, LockLostEvent{Name: name, Mode: Write, OwnerToken: owner.Token()})
	// The watchdog noticed first; the release still says lost, and a second one not held.
	wantErr(t, hold.Release(bg), ErrLockLost)
	wantErr(t, hold.Release(bg), ErrNotHeld)
	if n := c.hooks.watched(); n != 0 {
		t.Fatalf("%d lost signals left", n)
	}
}

// A watched hold that vanished (another client's force unlock) and is taken again by its owner
// before a renewal looked: the earlier hold is reported lost then, and the new one is not.
func TestAnEarlierHoldThatANewAcquireFindsGoneIsReportedLost(t *testing.T) {
	var lost lostEvents
	// The default lease (30 s): no renewal runs during the test.
	c := connect(t, OnLockLost(lost.record))
	admin := connect(t)
	name := uniqueName(t)
	lock := mustLock(t, c, name)
	owner := NewOwner()
	first := mustAcquire(t, lock, owner)
	forceUnlockHeld(t, admin, name)
	second := mustAcquire(t, lock, owner)
	if second.HoldCount() != 1 || second.FencingToken() <= first.FencingToken() {
		t.Fatalf("not a new hold: count %d, fence %d after %d", second.HoldCount(),
			second.FencingToken(), first.FencingToken())
	}
	select {
	case <-first.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the first hold's Lost() was not closed")
	}
	lost.wantOne(t, LockLostEvent{Name: name, Mode: Write, OwnerToken: owner.Token()})
	select {
	case <-second.Lost():
		t.Fatal("the new hold was signalled lost")
	case <-time.After(300 * time.Millisecond):
	}
	if n := c.hooks.watched(); n != 1 {
		t.Fatalf("%d lost signals kept, want the new hold's", n)
	}
	if err := second.Release(bg); err != nil {
		t.Fatal(err)
	}
	if n := c.hooks.watched(); n != 0 {
		t.Fatalf("%d lost signals left", n)
	}
}

// One owner's release and new acquire race after its hold vanished: whichever Redis runs first,
// the vanished hold's Lost() closes, and the new hold keeps its signal exactly while the library
// keeps the hold (a release heard late must not drop it).
func TestAReleaseRacingANewAcquireLeavesTheNewHoldsSignal(t *testing.T) {
	const rounds = 40
	var lost lostEvents
	c := connect(t, OnLockLost(lost.record))
	admin := connect(t)
	name := uniqueName(t)
	lock := mustLock(t, c, name)
	for round := range rounds {
		owner := NewOwner()
		first := mustAcquire(t, lock, owner)
		forceUnlockHeld(t, admin, name)
		released := make(chan error, 1)
		go func() {
			_, err := lock.Release(bg, owner)
			released <- err
		}()
		second := mustAcquire(t, lock, owner)
		err := <-released
		select {
		case <-first.Lost():
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the vanished hold's Lost() was not closed", round)
		}
		switch {
		case errors.Is(err, ErrLockLost): // the release ran first
			if n := c.hooks.watched(); n != 1 {
				t.Fatalf("round %d: %d lost signals kept, want the new hold's", round, n)
			}
			if err := second.Release(bg); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case err == nil: // the acquire ran first, and the release ended the new hold
		default:
			t.Fatalf("round %d: the release said %v", round, err)
		}
		select {
		case <-second.Lost():
			t.Fatalf("round %d: the new hold was signalled lost", round)
		default:
		}
		if n := c.hooks.watched(); n != 0 {
			t.Fatalf("round %d: %d lost signals left", round, n)
		}
	}
	if events := lost.wait(rounds); len(events) != rounds {
		t.Fatalf("%d lost events, want %d", len(events), rounds)
	}
}

// Closing the client ends waits on Lost: nothing keeps the holds any more.
func TestClosingTheClientClosesLost(t *testing.T) {
	c := connect(t)
	hold := mustAcquire(t, mustLock(t, c, uniqueName(t)), NewOwner())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() was not closed by Close")
	}
	if n := c.hooks.watched(); n != 0 {
		t.Fatalf("%d lost signals left", n)
	}
}

func TestAReleaseThatFindsAWatchedHoldGoneIsLockLost(t *testing.T) {
	c := connect(t) // lease 30s: the watchdog has not noticed yet when the release does
	admin := connect(t)
	name := uniqueName(t)
	hold := mustAcquire(t, mustLock(t, c, name), NewOwner())
	admin.ForceUnlock(bg, name)
	wantErr(t, hold.Release(bg), ErrLockLost)
	select {
	case <-hold.Lost():
	default:
		t.Fatal("Lost() must be closed once the release found the hold gone")
	}
}

// A Hold's Release is of that hold alone: when it was force-unlocked (and reported lost) or its
// lease ran out, and the owner (shared by another goroutine) has taken the lock again, the
// release of the old Hold says so and leaves the newer hold, which it used to end.
func TestReleasingAnEndedHoldKeepsTheOwnersNewHold(t *testing.T) {
	c := connect(t)
	admin := connect(t)
	for _, forced := range []bool{true, false} {
		name := uniqueName(t)
		lock := mustLock(t, c, name)
		owner := NewOwner()
		var old *Hold
		if forced {
			old = mustAcquire(t, lock, owner) // kept by the watchdog
			if _, err := admin.ForceUnlock(bg, name); err != nil {
				t.Fatal(err)
			}
		} else {
			old = mustAcquire(t, lock, owner, WithLease(100*time.Millisecond))
			time.Sleep(250 * time.Millisecond)
		}
		renewed := mustAcquire(t, lock, owner, WithLease(30*time.Second))
		if forced {
			select {
			case <-old.Lost(): // found gone by the owner's new acquire
			case <-time.After(2 * time.Second):
				t.Fatal("the force-unlocked hold was not reported lost")
			}
		}
		if renewed.FencingToken() <= old.FencingToken() || renewed.HoldCount() != 1 {
			t.Fatalf("not a new hold: fences %d then %d, count %d",
				old.FencingToken(), renewed.FencingToken(), renewed.HoldCount())
		}
		err := old.Release(bg)
		if !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLockLost) {
			t.Fatalf("forced %v: the ended hold's release returned %v", forced, err)
		}
		if held := mustOK(t)(lock.IsHeldBy(bg, owner)); !held {
			t.Fatalf("forced %v: the owner's newer hold was released with the old one", forced)
		}
		if err := renewed.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
}

// A Hold's Release of an ended hold must leave the owner's newer hold alone also when
// the watchdog keeps that newer hold: not report it lost, and keep renewing it.
func TestReleasingAnEndedHoldKeepsTheOwnersNewWatchedHold(t *testing.T) {
	c := connect(t, WithDefaultLease(600*time.Millisecond))
	lock := mustLock(t, c, uniqueName(t))
	owner := NewOwner()
	old := mustAcquire(t, lock, owner, WithLease(100*time.Millisecond))
	time.Sleep(250 * time.Millisecond)
	renewed := mustAcquire(t, lock, owner) // kept by the watchdog
	if renewed.FencingToken() <= old.FencingToken() {
		t.Fatalf("not a new hold: fences %d then %d", old.FencingToken(), renewed.FencingToken())
	}
	err := old.Release(bg)
	if !errors.Is(err, ErrNotHeld) {
		t.Errorf("the ended hold's release returned %v, want ErrNotHeld", err)
	}
	select {
	case <-renewed.Lost():
		t.Errorf("the owner's newer, live hold was reported lost")
	default:
	}
	time.Sleep(1500 * time.Millisecond)
	if held := mustOK(t)(lock.IsHeldBy(bg, owner)); !held {
		t.Fatalf("the watchdog stopped keeping the owner's newer hold: it expired")
	}
	if err := renewed.Release(bg); err != nil {
		t.Fatal(err)
	}
}
