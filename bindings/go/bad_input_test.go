package redlock

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestNamesMustBe1To1024BytesOfUTF8(t *testing.T) {
	c := connect(t)
	for _, name := range []string{"", strings.Repeat("n", 1025), "bad \xff utf-8", "nul\x00inside"} {
		_, err := c.Lock(name)
		wantErr(t, err, ErrInvalidArgument)
		_, err = c.ReadWriteLock(name)
		wantErr(t, err, ErrInvalidArgument)
	}
	_, err := c.Lock(strings.Repeat("n", 1025))
	if !strings.Contains(err.Error(), "1025") {
		t.Fatalf("the message must say what is wrong: %v", err)
	}
}

func TestTokensMustBe1To512BytesOfUTF8(t *testing.T) {
	for _, token := range []string{"", strings.Repeat("t", 513), "\x80", "a\x00b"} {
		_, err := OwnerFromToken(token)
		wantErr(t, err, ErrInvalidArgument)
	}
	owner, err := OwnerFromToken("tok 🔒")
	if err != nil || owner.Token() != "tok 🔒" {
		t.Fatalf("%v %v", owner, err)
	}
}

func TestZeroAndNegativeDurationsAreInvalid(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	owner := NewOwner()
	for _, d := range []time.Duration{0, -time.Millisecond, -time.Nanosecond} {
		_, err := lock.TryAcquire(bg, owner, WithLease(d))
		if d != 0 { // WithLease(0) means "no fixed lease"
			wantErr(t, err, ErrInvalidArgument)
		}
		if err == nil {
			lock.Release(bg, owner)
		}
		wantErr(t, lock.Extend(bg, owner, d), ErrInvalidArgument)
	}
	_, err := Connect(bg, redisURL, WithCommandTimeout(-time.Second))
	wantErr(t, err, ErrInvalidArgument)
	_, err = Connect(bg, redisURL, WithDefaultLease(-1))
	wantErr(t, err, ErrInvalidArgument)
	_, err = Connect(bg, redisURL, WithContentionAlert(0, -3))
	wantErr(t, err, ErrInvalidArgument)
	_, err = Connect(bg, redisURL, WithPrefix("bad{prefix}"))
	wantErr(t, err, ErrInvalidArgument)
	// A sub-millisecond lease is rounded up, not refused: it means "as short as possible".
	hold, err := lock.TryAcquire(bg, owner, WithLease(500*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	hold.Release(bg)
}

func TestNilOwnersAreInvalid(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	_, err := lock.Acquire(bg, nil)
	wantErr(t, err, ErrInvalidArgument)
	_, err = lock.Release(bg, nil)
	wantErr(t, err, ErrInvalidArgument)
	wantErr(t, lock.Extend(bg, nil, time.Second), ErrInvalidArgument)
	_, err = lock.HoldCount(bg, nil)
	wantErr(t, err, ErrInvalidArgument)
}

func TestBadURLsAndUnreachableServersAreReported(t *testing.T) {
	_, err := Connect(bg, "not a url")
	wantErr(t, err, ErrInvalidArgument)
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	_, err = Connect(ctx, "redis://user:s3cret@127.0.0.1:1") // nothing listens on port 1
	wantErr(t, err, ErrConnection)
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the password must not appear in errors: %v", err)
	}
}
