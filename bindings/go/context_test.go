package redlock

import (
	"context"
	"math"
	"net"
	"testing"
	"time"
)

func TestTheContextDeadlineIsTheWait(t *testing.T) {
	onBothWaitPaths(t, testTheContextDeadlineIsTheWait)
}

func testTheContextDeadlineIsTheWait(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	defer mustAcquire(t, lock, NewOwner()).Release(bg)
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err := lock.Acquire(ctx, NewOwner())
	waited := time.Since(started)
	wantErr(t, err, ErrTimeout)
	wantErr(t, err, context.DeadlineExceeded)
	if waited < 250*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("waited %v for a 300ms deadline", waited)
	}
}

// A deadline as far away as a Duration goes (context.WithTimeout(ctx, math.MaxInt64), a way
// of writing "no limit") is a wait like any other: its milliseconds overflowed when rounded up.
func TestAnEndlessTimeoutIsAValidWait(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 500*time.Microsecond} {
		ctx, cancel := context.WithTimeout(bg, d)
		hold, err := lock.Acquire(ctx, NewOwner())
		cancel()
		if err != nil {
			t.Fatalf("Acquire with context.WithTimeout(ctx, %d) on a free lock: %v", int64(d), err)
		}
		if err := hold.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCancellingTheContextEndsTheWaitAndLeavesNothing(t *testing.T) {
	onBothWaitPaths(t, testCancellingTheContextEndsTheWaitAndLeavesNothing)
}

func testCancellingTheContextEndsTheWaitAndLeavesNothing(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	holder := mustAcquire(t, lock, NewOwner())
	ctx, cancel := context.WithCancel(bg)
	result := make(chan error, 1)
	go func() {
		_, err := lock.Acquire(ctx, NewOwner())
		result <- err
	}()
	// The waiter announces itself on its first failed attempt: how soon depends on the
	// scheduler (valgrind, -race, a loaded CI machine), so it is polled for, not slept for.
	if !eventually(10*time.Second, func() bool {
		info, err := lock.Inspect(bg)
		return err == nil && info.WaitingWriters == 1
	}) {
		info, _ := lock.Inspect(bg)
		t.Fatalf("the waiter must be announced: %+v", info)
	}
	cancelled := time.Now()
	cancel()
	select {
	case err := <-result:
		wantErr(t, err, ErrCanceled)
		wantErr(t, err, context.Canceled)
		if time.Since(cancelled) > time.Second {
			t.Fatal("the wait must end at once")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the context did not end the wait")
	}
	if !eventually(2*time.Second, func() bool {
		info, err := lock.Inspect(bg)
		return err == nil && info.WaitingWriters == 0
	}) {
		t.Fatal("the cancelled waiter's announcement must be withdrawn")
	}
	holder.Release(bg)
	if n := lockKeyCount(t, lock.Name()); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

func TestAnEndedContextStartsNoCall(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := lock.Acquire(ctx, NewOwner())
	wantErr(t, err, context.Canceled)
	if locked := mustOK(t)(lock.IsLocked(bg)); locked {
		t.Fatal("nothing may be taken with an ended context")
	}
	_, err = Connect(ctx, redisURL)
	wantErr(t, err, ErrCanceled)
}

func TestClosingTheClientEndsWaitsWithClosed(t *testing.T) {
	onBothWaitPaths(t, testClosingTheClientEndsWaitsWithClosed)
}

func testClosingTheClientEndsWaitsWithClosed(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	mustAcquire(t, lock, NewOwner(), WithLease(2*time.Second))
	result := make(chan error, 1)
	go func() {
		_, err := lock.Acquire(bg, NewOwner())
		result <- err
	}()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	select {
	case err := <-result:
		wantErr(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("closing the client did not end the wait")
	}
	_, err := lock.TryAcquire(bg, NewOwner())
	wantErr(t, err, ErrClosed)
	_, err = c.Lock("after close")
	wantErr(t, err, ErrClosed)
	if err := c.Close(); err != nil {
		t.Fatal("closing twice is harmless")
	}
}

func TestAClosedClientRefusesEveryCallAndItsHoldStaysReleasable(t *testing.T) {
	c := connect(t)
	other := connect(t)
	name := uniqueName(t)
	lock := mustLock(t, c, name)
	owner := NewOwner()
	hold := mustAcquire(t, lock, owner, WithLease(30*time.Second))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, hold.Release(bg), ErrClosed)
	// Redis never heard the release: the hold is still there, so the Hold is not spent.
	wantErr(t, hold.Release(bg), ErrClosed)
	wantErr(t, hold.Extend(bg, time.Second), ErrClosed)
	_, err := lock.Release(bg, owner)
	wantErr(t, err, ErrClosed)
	wantErr(t, lock.Extend(bg, owner, time.Second), ErrClosed)
	_, err = lock.IsLocked(bg)
	wantErr(t, err, ErrClosed)
	_, err = lock.Inspect(bg)
	wantErr(t, err, ErrClosed)
	_, err = c.ForceUnlock(bg, name)
	wantErr(t, err, ErrClosed)
	// Another client, presenting the token, can still release it.
	remaining, err := mustLock(t, other, name).Release(bg, owner)
	if err != nil || remaining != 0 {
		t.Fatalf("release through the token: %d, %v", remaining, err)
	}
}

func TestAClientThatConnectDidNotReturnClosesWithAnError(t *testing.T) {
	var zero Client
	wantErr(t, zero.Close(), ErrInvalidArgument)
	_, err := zero.Lock("x")
	wantErr(t, err, ErrInvalidArgument)
}

func TestATimedOutAcquireLeavesNothing(t *testing.T) {
	c := connect(t)
	rw, err := c.ReadWriteLock(uniqueName(t))
	if err != nil {
		t.Fatal(err)
	}
	holder := mustAcquire(t, rw.Write(), NewOwner())
	for _, view := range []*Lock{rw.Read(), rw.Write()} {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		_, err := view.Acquire(ctx, NewOwner())
		cancel()
		wantErr(t, err, ErrTimeout)
	}
	if !eventually(2*time.Second, func() bool {
		info, err := rw.Read().Inspect(bg)
		return err == nil && info.WaitingWriters == 0 && info.WaitingReaders == 0
	}) {
		t.Fatal("timed-out waiters must withdraw their announcements")
	}
	if err := holder.Release(bg); err != nil {
		t.Fatal(err)
	}
	if n := lockKeyCount(t, rw.Read().Name()); n != 0 {
		t.Fatalf("%d keys left in Redis", n)
	}
}

func TestCancellingTheContextEndsAConnect(t *testing.T) {
	// A loopback port that accepts connections (the kernel's backlog) but never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(200*time.Millisecond, cancel)
	started := time.Now()
	c, err := Connect(ctx, "redis://"+silent.Addr().String(), WithConnectTimeout(20*time.Second))
	if c != nil {
		c.Close()
	}
	wantErr(t, err, ErrCanceled)
	wantErr(t, err, context.Canceled)
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("the connect ended %v after it started, long after its context", took)
	}
}

// A deferred Release with the request's context must free the lock even when that context
// ended during the critical section: a cancelled request must not leave its lock held (the
// watchdog would keep it until the process exits).
func TestAReleaseRunsAfterItsContextEnded(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	owner := NewOwner()
	for _, viaHold := range []bool{true, false} {
		ctx, cancel := context.WithCancel(bg)
		hold, err := lock.Acquire(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if viaHold {
			err = hold.Release(ctx)
		} else {
			_, err = lock.Release(ctx, owner)
		}
		if err != nil {
			t.Fatalf("release (via hold: %v) after the context ended: %v", viaHold, err)
		}
		if held, err := lock.IsLocked(bg); err != nil || held {
			t.Fatalf("still locked after the release (via hold: %v): %v %v", viaHold, held, err)
		}
	}
}
