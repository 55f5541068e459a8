package redlock

import (
	"context"
	"testing"
	"time"
)

func newRW(t *testing.T) (*Client, *ReadWriteLock) {
	c := connect(t)
	rw, err := c.ReadWriteLock(uniqueName(t))
	if err != nil {
		t.Fatal(err)
	}
	return c, rw
}

func TestReadersShareAndAWriterExcludes(t *testing.T) {
	_, rw := newRW(t)
	a, b, w := NewOwner(), NewOwner(), NewOwner()
	ra, rb := mustAcquire(t, rw.Read(), a), mustAcquire(t, rw.Read(), b)
	_, err := rw.Write().TryAcquire(bg, w)
	wantErr(t, err, ErrTimeout)
	info, _ := rw.Read().Inspect(bg)
	if info.Mode != Read || info.HolderCount != 2 {
		t.Fatalf("inspect: %+v", info)
	}
	ra.Release(bg)
	rb.Release(bg)
	hold := mustAcquire(t, rw.Write(), w)
	_, err = rw.Read().TryAcquire(bg, a)
	wantErr(t, err, ErrTimeout)
	hold.Release(bg)
	if n := lockKeyCount(t, rw.Read().Name()); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

func TestTheWriterMayDowngrade(t *testing.T) {
	_, rw := newRW(t)
	owner := NewOwner()
	write := mustAcquire(t, rw.Write(), owner)
	read := mustAcquire(t, rw.Read(), owner)
	if err := write.Release(bg); err != nil {
		t.Fatal(err)
	}
	reading := mustOK(t)(rw.Read().IsHeldBy(bg, owner))
	writing := mustOK(t)(rw.Write().IsHeldBy(bg, owner))
	if !reading || writing {
		t.Fatalf("reading %v writing %v", reading, writing)
	}
	mustAcquire(t, rw.Read(), NewOwner()) // others may read now
	_, err := rw.Write().TryAcquire(bg, NewOwner())
	wantErr(t, err, ErrTimeout)
	read.Release(bg)
}

func TestUpgradeFailsAtOnceInsteadOfHanging(t *testing.T) {
	_, rw := newRW(t)
	owner := NewOwner()
	read := mustAcquire(t, rw.Read(), owner)
	defer read.Release(bg)
	started := time.Now()
	_, err := rw.Write().Acquire(bg, owner) // no deadline: would wait forever if it could
	wantErr(t, err, ErrUpgradeNotAllowed)
	if time.Since(started) > 2*time.Second {
		t.Fatal("upgrade must fail at once")
	}
}

func TestAWaitingWriterIsNotStarvedByNewReaders(t *testing.T) {
	_, rw := newRW(t)
	reader, writer := NewOwner(), NewOwner()
	read := mustAcquire(t, rw.Read(), reader)
	done := make(chan error, 1)
	go func() {
		// Long enough for the announcement to be polled for on a loaded machine (below).
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		hold, err := rw.Write().Acquire(ctx, writer)
		if err == nil {
			err = hold.Release(bg)
		}
		done <- err
	}()
	// The writer announces itself (polled: under load it may take far longer than usual).
	if !eventually(10*time.Second, func() bool {
		info, err := rw.Write().Inspect(bg)
		return err == nil && info.WaitingWriters == 1
	}) {
		t.Fatal("the writer never announced itself as waiting")
	}
	_, err := rw.Read().TryAcquire(bg, NewOwner())
	wantErr(t, err, ErrTimeout) // a new reader queues behind the waiting writer
	read.Release(bg)
	if err := <-done; err != nil {
		t.Fatalf("the writer: %v", err)
	}
}

func TestEachReaderHasItsOwnLease(t *testing.T) {
	_, rw := newRW(t)
	crashed, alive := NewOwner(), NewOwner()
	mustAcquire(t, rw.Read(), crashed, WithLease(200*time.Millisecond))
	hold := mustAcquire(t, rw.Read(), alive, WithLease(20*time.Second))
	time.Sleep(400 * time.Millisecond)
	if held := mustOK(t)(rw.Read().IsHeldBy(bg, crashed)); held {
		t.Fatal("the crashed reader's share must expire")
	}
	if held := mustOK(t)(rw.Read().IsHeldBy(bg, alive)); !held {
		t.Fatal("the other reader keeps its share")
	}
	hold.Release(bg)
}

func TestBothModesAreReentrant(t *testing.T) {
	c := connect(t)
	rw, err := c.ReadWriteLock(uniqueName(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range []*Lock{rw.Write(), rw.Read()} {
		owner := NewOwner()
		first := mustAcquire(t, view, owner)
		second := mustAcquire(t, view, owner)
		if first.HoldCount() != 1 || second.HoldCount() != 2 {
			t.Fatalf("%v: hold counts %d, %d", view.Mode(), first.HoldCount(), second.HoldCount())
		}
		if n, err := view.HoldCount(bg, owner); err != nil || n != 2 {
			t.Fatalf("%v: hold count %d, %v", view.Mode(), n, err)
		}
		if err := second.Release(bg); err != nil {
			t.Fatal(err)
		}
		if !mustOK(t)(view.IsHeldBy(bg, owner)) {
			t.Fatalf("%v: one release of two leaves it held", view.Mode())
		}
		if err := first.Release(bg); err != nil {
			t.Fatal(err)
		}
		if mustOK(t)(rw.Read().IsLocked(bg)) {
			t.Fatalf("%v: released as often as acquired, it is free", view.Mode())
		}
	}
}
