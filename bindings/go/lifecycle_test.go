// Lifecycle and context edges found by an audit of the binding (2026-11-26): Close gives back
// the client's sockets, the context bounds an acquire even while Redis is slow to answer its
// first attempt, a deadline under a millisecond is still a deadline, a connect that runs into the
// deadline fails one way, and what late attempts did is undone.

package redlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// clientsInfoField reads one field of INFO clients (a bulk reply, which redisCommand does not
// read whole).
func clientsInfoField(t *testing.T, field string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", redisAddr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$7\r\nclients\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO: %q %v", head, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("INFO: no %s", field)
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			var n int
			fmt.Sscan(rest, &n)
			// This connection counts itself.
			if field == "connected_clients" {
				n--
			}
			return n
		}
	}
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

// Close must close the client's connections to Redis: a closed Client that is still referenced
// (a field of a long-lived struct) must not keep sockets open in this process and in Redis.
func TestCloseClosesTheClientsConnections(t *testing.T) {
	before := clientsInfoField(t, "connected_clients")
	fdsBefore := openFDs(t)
	c, err := Connect(bg, redisURL)
	if err != nil {
		t.Fatal(err)
	}
	lock := mustLock(t, c, uniqueName(t))
	hold := mustAcquire(t, lock, NewOwner())
	if err := hold.Release(bg); err != nil {
		t.Fatal(err)
	}
	during := clientsInfoField(t, "connected_clients")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var after int
	closed := eventually(3*time.Second, func() bool {
		after = clientsInfoField(t, "connected_clients")
		return after <= before
	})
	fdsAfter := openFDs(t)
	t.Logf("redis connections: %d before, %d open, %d 3s after Close; fds %d before, %d after",
		before, during, after, fdsBefore, fdsAfter)
	// The closed client and its lock stay referenced, as in a program that keeps them in a struct.
	_, _ = lock.IsLocked(bg)
	if !closed {
		t.Fatalf("Close left %d connection(s) to Redis open (%d before Connect)", after-before, before)
	}
}

// Connect/Close cycles must not accumulate sockets: each Close must give its connections back
// without waiting for the garbage collector to run a cleanup.
func TestConnectCloseCyclesLeakNoSockets(t *testing.T) {
	const cycles = 100
	before := clientsInfoField(t, "connected_clients")
	fdsBefore := openFDs(t)
	name := uniqueName(t)
	for i := 0; i < cycles; i++ {
		c, err := Connect(bg, redisURL)
		if err != nil {
			t.Fatal(err)
		}
		l := mustLock(t, c, name)
		h := mustAcquire(t, l, NewOwner())
		if err := h.Release(bg); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	after := clientsInfoField(t, "connected_clients")
	fdsAfter := openFDs(t)
	t.Logf("after %d Connect/Close cycles: redis connections %d -> %d, fds %d -> %d",
		cycles, before, after, fdsBefore, fdsAfter)
	if after-before > 10 || fdsAfter-fdsBefore > 10 {
		t.Fatalf("%d Connect/Close cycles left %d Redis connections and %d fds open",
			cycles, after-before, fdsAfter-fdsBefore)
	}
}

// A deadline less than a millisecond away is still the context's deadline: the documented
// error matches context.DeadlineExceeded as well as ErrTimeout.
func TestASubMillisecondDeadlineIsStillADeadline(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	holder := mustAcquire(t, lock, NewOwner())
	defer holder.Release(bg)
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithDeadline(bg, time.Now().Add(900*time.Microsecond))
		_, err := lock.Acquire(ctx, NewOwner())
		cancel()
		wantErr(t, err, ErrTimeout)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("round %d: the deadline ended the wait, but the error does not match "+
				"context.DeadlineExceeded: %v", i, err)
		}
	}
}

// A cancel that races the hand-over of the lock to the waiter: whatever wins, the waiter either
// gets a hold that is really its own, or an error and nothing of it is left in Redis.
func TestCancelRacingTheGrantLeavesNothing(t *testing.T) {
	onBothWaitPaths(t, func(t *testing.T) {
		c := connect(t)
		lock := mustLock(t, c, uniqueName(t))
		const rounds = 60
		got, cancelled := 0, 0
		for round := 0; round < rounds; round++ {
			holder := mustAcquire(t, lock, NewOwner())
			waiter := NewOwner()
			ctx, cancel := context.WithCancel(bg)
			type result struct {
				hold *Hold
				err  error
			}
			done := make(chan result, 1)
			go func() {
				h, err := lock.Acquire(ctx, waiter)
				done <- result{h, err}
			}()
			if !eventually(5*time.Second, func() bool {
				info, err := lock.Inspect(bg)
				return err == nil && info.WaitingWriters == 1
			}) {
				t.Fatalf("round %d: the waiter never queued", round)
			}
			jitter := time.Duration(rand.Intn(400)) * time.Microsecond
			go func() { time.Sleep(jitter); cancel() }()
			if err := holder.Release(bg); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: the acquire never returned", round)
			}
			if r.err == nil {
				got++
				if held := mustOK(t)(lock.IsHeldBy(bg, waiter)); !held {
					t.Fatalf("round %d: Acquire reported success but the waiter does not hold the lock", round)
				}
				if err := r.hold.Release(bg); err != nil {
					t.Fatalf("round %d: release: %v", round, err)
				}
			} else {
				cancelled++
				if !errors.Is(r.err, ErrCanceled) {
					t.Fatalf("round %d: %v", round, r.err)
				}
			}
			if !eventually(3*time.Second, func() bool {
				locked, err := lock.IsLocked(bg)
				return err == nil && !locked
			}) {
				t.Fatalf("round %d (acquire said %v): the lock stayed held", round, r.err)
			}
		}
		if !eventually(3*time.Second, func() bool { return lockKeyCount(t, lock.Name()) == 0 }) {
			t.Fatalf("%d keys left", lockKeyCount(t, lock.Name()))
		}
		t.Logf("%d acquired, %d cancelled", got, cancelled)
	})
}

// Close while goroutines acquire and release: every call returns, every hold reported is
// either released or signalled lost, and nothing stays in Redis beyond the lease.
func TestCloseDuringBusyLockingLeavesNothingBeyondTheLease(t *testing.T) {
	onBothWaitPaths(t, func(t *testing.T) {
		const lease = 800 * time.Millisecond
		c, err := Connect(bg, redisURL, WithDefaultLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		observer := connect(t)
		name := uniqueName(t)
		lock := mustLock(t, c, name)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var kept []*Hold
		stop := make(chan struct{})
		for g := 0; g < 12; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := NewOwner()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(bg, time.Duration(1+rand.Intn(30))*time.Millisecond)
					h, err := lock.Acquire(ctx, owner)
					cancel()
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						continue
					}
					if rel := h.Release(bg); rel != nil {
						mu.Lock()
						kept = append(kept, h)
						mu.Unlock()
						if errors.Is(rel, ErrClosed) {
							return
						}
					}
				}
			}()
		}
		time.Sleep(300 * time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatal("calls did not return after Close")
		}
		for _, h := range kept {
			select {
			case <-h.Lost():
			case <-time.After(2 * time.Second):
				t.Fatal("a hold whose release failed after Close is not signalled lost")
			}
		}
		if !eventually(lease+3*time.Second, func() bool {
			locked, err := mustLock(t, observer, name).IsLocked(bg)
			return err == nil && !locked
		}) {
			t.Fatal("the lock stayed held past its lease after Close")
		}
	})
}

// pauseRedis makes the test's redis-server hold every client's commands for d (a Redis
// that is slow to answer, as under a long-running script or a failover).
func pauseRedis(t *testing.T, d time.Duration) {
	t.Helper()
	reply, err := redisCommand("CLIENT", "PAUSE", fmt.Sprint(d.Milliseconds()), "ALL")
	if err != nil || reply != "+OK" {
		t.Fatalf("CLIENT PAUSE: %q %v", reply, err)
	}
}

// The context bounds Acquire: "ctx's deadline is the wait, and cancelling ctx ends the wait at
// once". A Redis that is slow to answer the first attempt must not keep Acquire (nor TryAcquire)
// blocked for the whole command timeout past the context's end, and then report success.
func TestAcquireReturnsAtTheContextsEndWhileRedisIsSlow(t *testing.T) {
	onBothWaitPaths(t, func(t *testing.T) {
		for _, how := range []string{"deadline", "cancel", "try"} {
			t.Run(how, func(t *testing.T) {
				c := connect(t, WithCommandTimeout(5*time.Second))
				lock := mustLock(t, c, uniqueName(t))
				owner := NewOwner()
				// Warm up the connections, so the pause hits the attempt and not a connect.
				h := mustAcquire(t, lock, owner)
				if err := h.Release(bg); err != nil {
					t.Fatal(err)
				}
				pauseRedis(t, 3*time.Second)
				// The next test must not meet a paused server (the attempt is undone late).
				defer redisCommand("CLIENT", "UNPAUSE")
				var ctx context.Context
				var cancel context.CancelFunc
				if how == "cancel" {
					ctx, cancel = context.WithCancel(bg)
					time.AfterFunc(200*time.Millisecond, cancel)
				} else {
					ctx, cancel = context.WithTimeout(bg, 200*time.Millisecond)
				}
				defer cancel()
				started := time.Now()
				var hold *Hold
				var err error
				if how == "try" {
					hold, err = lock.TryAcquire(ctx, owner)
				} else {
					hold, err = lock.Acquire(ctx, owner)
				}
				took := time.Since(started)
				if hold != nil {
					defer hold.Release(bg)
				}
				t.Logf("returned after %v: acquired %v, err %v, ctx %v", took, hold != nil, err, ctx.Err())
				if took > time.Second {
					t.Fatalf("the context ended after 200ms, but the call returned after %v (err %v, acquired %v)",
						took, err, hold != nil)
				}
			})
		}
	})
}

// "an unreachable Redis is ErrConnection", and a deadline of ctx sooner than the connect
// timeout takes its place: the kind must not depend on which of two timers fires first.
func TestAConnectThatRunsIntoTheContextsDeadlineIsOneKindOfError(t *testing.T) {
	// A loopback port that accepts connections (the kernel's backlog) but never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	kinds := map[string]int{}
	for i := 0; i < 12; i++ {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		c, err := Connect(ctx, "redis://"+silent.Addr().String())
		cancel()
		if c != nil {
			c.Close()
			t.Fatal("connected to a server that never answers")
		}
		switch {
		case errors.Is(err, ErrConnection):
			kinds["ErrConnection"]++
		case errors.Is(err, ErrTimeout):
			kinds["ErrTimeout"]++
		default:
			kinds[err.Error()]++
		}
	}
	if len(kinds) != 1 || kinds["ErrConnection"] == 0 {
		t.Fatalf("one unreachable server, one deadline, different kinds of error: %v", kinds)
	}
}

// An acquire whose first attempt runs into the command timeout reports ErrConnection; Redis runs
// the attempt late, and what it did must be undone: no hold is left that nobody owns.
func TestAnAttemptThatTimedOutIsUndoneWhenRedisRunsItLate(t *testing.T) {
	onBothWaitPaths(t, func(t *testing.T) {
		for _, lease := range []time.Duration{0, 20 * time.Second} {
			c := connect(t, WithCommandTimeout(500*time.Millisecond))
			observer := connect(t)
			name := uniqueName(t)
			lock := mustLock(t, c, name)
			owner := NewOwner()
			h := mustAcquire(t, lock, owner)
			if err := h.Release(bg); err != nil {
				t.Fatal(err)
			}
			pauseRedis(t, 1500*time.Millisecond)
			var opts []AcquireOption
			if lease > 0 {
				opts = append(opts, WithLease(lease))
			}
			hold, err := lock.Acquire(bg, owner, opts...)
			if err == nil {
				hold.Release(bg)
				t.Logf("lease %v: acquired after the pause", lease)
				continue
			}
			wantErr(t, err, ErrConnection)
			if !eventually(5*time.Second, func() bool {
				locked, err := mustLock(t, observer, name).IsLocked(bg)
				return err == nil && !locked
			}) {
				t.Fatalf("lease %v: the timed-out attempt's hold was left in Redis", lease)
			}
		}
	})
}
