package redlock

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// onBothWaitPaths runs test with waits in a blocking call, then with every blocking wait taken,
// so that waits go through rl_lock_acquire_start and park without a thread.
func onBothWaitPaths(t *testing.T, test func(t *testing.T)) {
	t.Run("blocking", test)
	t.Run("without a thread", func(t *testing.T) {
		for i := 0; i < MaxBlockingWaits; i++ {
			blockingWaits <- struct{}{}
		}
		defer func() {
			for i := 0; i < MaxBlockingWaits; i++ {
				<-blockingWaits
			}
		}()
		test(t)
	})
}

// A hold handed over to a waiter without a thread is the waiter's, watched like any other:
// its fencing token moves on and its loss is signalled.
func TestAWaitWithoutAThreadGetsAWatchedHold(t *testing.T) {
	onBothWaitPaths(t, func(t *testing.T) {
		c := connect(t, WithDefaultLease(time.Second))
		lock := mustLock(t, c, uniqueName(t))
		first := mustAcquire(t, lock, NewOwner())
		result := make(chan *Hold, 1)
		go func() {
			ctx, cancel := context.WithTimeout(bg, 10*time.Second)
			defer cancel()
			hold, err := lock.Acquire(ctx, NewOwner())
			if err != nil {
				t.Error(err)
			}
			result <- hold
		}()
		if !eventually(5*time.Second, func() bool {
			info, err := lock.Inspect(bg)
			return err == nil && info.WaitingWriters == 1
		}) {
			t.Fatal("the waiter never announced itself")
		}
		if err := first.Release(bg); err != nil {
			t.Fatal(err)
		}
		hold := <-result
		if hold == nil {
			return
		}
		if hold.FencingToken() <= first.FencingToken() || hold.HoldCount() != 1 {
			t.Fatalf("fence %d after %d, count %d", hold.FencingToken(), first.FencingToken(), hold.HoldCount())
		}
		if held := mustOK(t)(lock.IsHeldBy(bg, hold.Owner())); !held {
			t.Fatal("the waiter does not hold the lock")
		}
		if _, err := lock.ForceUnlock(bg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-hold.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("the loss of the handed-over hold was not signalled")
		}
	})
}

// osThreads is this process's number of OS threads (Linux).
func osThreads(t *testing.T) int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

// Waiting goroutines beyond MaxBlockingWaits park without an OS thread each (a blocking cgo
// call would hold one), and each gets the lock in turn once the holder lets go.
func TestWaitingGoroutinesHoldNoThreadEach(t *testing.T) {
	const waiters = 300
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	holder := NewOwner()
	hold := mustAcquire(t, lock, holder)
	before := osThreads(t)

	var inside, acquired atomic.Int64
	var wg sync.WaitGroup
	waitFor := func(count int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := lock.Inspect(bg)
			if err != nil {
				t.Fatal(err)
			}
			if info.WaitingWriters == uint64(count) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d goroutines are waiting", info.WaitingWriters, count)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// In waves: every cgo call holds a thread while it runs (the first attempt too), so a
	// burst of first attempts would add threads of its own.
	const wave = 10
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			defer cancel()
			h, err := lock.Acquire(ctx, NewOwner(), WithLease(10*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			if inside.Add(1) != 1 {
				t.Error("two holders at once")
			}
			acquired.Add(1)
			inside.Add(-1)
			if err := h.Release(bg); err != nil {
				t.Error(err)
			}
		}()
		if (i+1)%wave == 0 {
			waitFor(i + 1)
		}
	}
	during := osThreads(t)
	t.Logf("%d goroutines waiting: %d OS threads, %d before", waiters, during, before)
	if during-before > MaxBlockingWaits+wave+30 {
		t.Errorf("%d goroutines waiting took %d more OS threads (%d before)", waiters, during-before, before)
	}
	if err := hold.Release(bg); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := acquired.Load(); got != waiters {
		t.Fatalf("%d of %d waiters acquired", got, waiters)
	}
}
