package redlock

import (
	"strings"
	"testing"
	"time"
)

func TestReentrantHoldsCountUpAndDown(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	owner, other := NewOwner(), NewOwner()
	first := mustAcquire(t, lock, owner)
	second := mustAcquire(t, lock, owner)
	if first.HoldCount() != 1 || second.HoldCount() != 2 {
		t.Fatalf("hold counts %d, %d", first.HoldCount(), second.HoldCount())
	}
	if first.FencingToken() != second.FencingToken() {
		t.Fatal("a re-entry must keep the fencing token of the hold it re-enters")
	}
	_, err := lock.TryAcquire(bg, other)
	wantErr(t, err, ErrTimeout)
	if err := second.Release(bg); err != nil {
		t.Fatal(err)
	}
	wantErr(t, second.Release(bg), ErrNotHeld) // the same Hold twice: refused, first stays
	if locked := mustOK(t)(lock.IsLocked(bg)); !locked {
		t.Fatal("the first hold must remain")
	}
	if err := first.Release(bg); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, lock, other).Release(bg)
}

func TestReleaseByANonOwnerFailsAndChangesNothing(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	owner, stranger := NewOwner(), NewOwner()
	_, err := lock.Release(bg, owner)
	wantErr(t, err, ErrNotHeld) // never held
	hold := mustAcquire(t, lock, owner, WithLease(10*time.Second))
	_, err = lock.Release(bg, stranger)
	wantErr(t, err, ErrNotHeld)
	wantErr(t, lock.Extend(bg, stranger, time.Second), ErrNotHeld)
	if held := mustOK(t)(lock.IsHeldBy(bg, owner)); !held {
		t.Fatal("a stranger's release must change nothing")
	}
	if err := hold.Release(bg); err != nil {
		t.Fatal(err)
	}
	_, err = lock.Release(bg, owner)
	wantErr(t, err, ErrNotHeld) // double release
	if n := lockKeyCount(t, lock.Name()); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// Seed 000: lock and unlock may run on different instances; the token is the owner.
func TestTokenHandedToAnotherClientReleasesTheLock(t *testing.T) {
	name := uniqueName(t)
	taker, releaser := connect(t), connect(t)
	owner := NewOwner()
	mustAcquire(t, mustLock(t, taker, name), owner, WithLease(30*time.Second))
	same, err := OwnerFromToken(owner.Token())
	if err != nil {
		t.Fatal(err)
	}
	other := mustLock(t, releaser, name)
	if held := mustOK(t)(other.IsHeldBy(bg, same)); !held {
		t.Fatal("the token must name the same owner in another client")
	}
	if remaining, err := other.Release(bg, same); err != nil || remaining != 0 {
		t.Fatalf("release with the token: %d %v", remaining, err)
	}
	if locked := mustOK(t)(mustLock(t, taker, name).IsLocked(bg)); locked {
		t.Fatal("the lock must be free")
	}
}

func TestFencingTokensStrictlyIncrease(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	var last uint64
	for i := 0; i < 20; i++ {
		hold := mustAcquire(t, lock, NewOwner(), WithLease(5*time.Second))
		if hold.FencingToken() <= last {
			t.Fatalf("token %d after %d", hold.FencingToken(), last)
		}
		last = hold.FencingToken()
		if err := hold.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExclusiveLockAndWriteViewAreOneResource(t *testing.T) {
	c := connect(t)
	name := uniqueName(t)
	mustAcquire(t, mustLock(t, c, name), NewOwner())
	rw, err := c.ReadWriteLock(name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rw.Write().TryAcquire(bg, NewOwner())
	wantErr(t, err, ErrTimeout)
	_, err = rw.Read().TryAcquire(bg, NewOwner())
	wantErr(t, err, ErrTimeout)
	if _, err := c.ForceUnlock(bg, name); err != nil {
		t.Fatal(err)
	}
}

func TestOddNamesWorkAndStayDistinct(t *testing.T) {
	c := connect(t)
	owner := NewOwner()
	names := []string{"go-test:{braces}", "go-test:%7Bbraces%7D", "go-test: spaces 🔒", strings.Repeat("n", 1024)}
	for _, name := range names {
		lock := mustLock(t, c, name)
		mustAcquire(t, lock, owner, WithLease(5*time.Second)) // free although the others are held
		if lock.Name() != name || lock.Mode() != Write {
			t.Fatalf("name %q mode %v", lock.Name(), lock.Mode())
		}
	}
	info, err := c.Inspect(bg, names[2])
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != names[2] || info.Mode != Write || info.HolderCount != 1 || info.Holders[0].OwnerToken != owner.Token() {
		t.Fatalf("inspect: %+v", info)
	}
	for _, name := range names {
		if _, err := mustLock(t, c, name).Release(bg, owner); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInspectShowsHolderMetadata(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	owner := NewOwner()
	hold := mustAcquire(t, lock, owner, WithLease(10*time.Second), WithLabel("job 7"))
	defer hold.Release(bg)
	info, err := lock.Inspect(bg)
	if err != nil {
		t.Fatal(err)
	}
	h := info.Holders[0]
	if h.Thread != "job 7" || h.HoldCount != 1 || h.FencingToken != hold.FencingToken() ||
		h.LeaseLeft <= 0 || h.LeaseLeft > 10*time.Second || h.PID == 0 || h.AcquiredAt.IsZero() {
		t.Fatalf("holder: %+v", h)
	}
	if info.LastFencingToken < hold.FencingToken() {
		t.Fatalf("last fencing token %d < %d", info.LastFencingToken, hold.FencingToken())
	}
	_, err = lock.TryAcquire(bg, NewOwner(), WithLabel(""))
	wantErr(t, err, ErrInvalidArgument)
}
