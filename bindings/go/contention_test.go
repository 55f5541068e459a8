package redlock

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const goroutines, rounds = 5, 20

// The counter is read, then written a little later: without mutual exclusion, updates get lost.
// (atomic loads and stores keep the race detector to what it should judge: the lock.)
func countUnder(lockFn func(), unlockFn func(), counter *atomic.Int64) {
	for i := 0; i < rounds; i++ {
		lockFn()
		seen := counter.Load()
		time.Sleep(time.Millisecond)
		counter.Store(seen + 1)
		unlockFn()
	}
}

func TestGoroutinesContendWithoutALostUpdate(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	var counter atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := NewOwner() // one owner per goroutine: they exclude each other
			var hold *Hold
			countUnder(func() {
				ctx, cancel := context.WithTimeout(bg, 10*time.Second)
				defer cancel()
				var err error
				if hold, err = lock.Acquire(ctx, owner); err != nil {
					t.Error(err)
				}
			}, func() {
				if err := hold.Release(bg); err != nil {
					t.Error(err)
				}
			}, &counter)
		}()
	}
	wg.Wait()
	if got := counter.Load(); got != goroutines*rounds {
		t.Fatalf("counter %d, want %d: an update was lost", got, goroutines*rounds)
	}
}

func TestALockerExcludesGoroutinesLikeAMutex(t *testing.T) {
	c := connect(t)
	locker := mustLock(t, c, uniqueName(t)).Locker()
	var counter atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			countUnder(locker.Lock, locker.Unlock, &counter)
		}()
	}
	wg.Wait()
	if got := counter.Load(); got != goroutines*rounds {
		t.Fatalf("counter %d, want %d", got, goroutines*rounds)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of an unlocked Locker must panic, like sync.Mutex")
		}
	}()
	locker.Unlock()
}

func TestALongWaitRaisesAContentionAlertNamingTheHolder(t *testing.T) {
	alerts := make(chan ContentionAlert, 1)
	c := connect(t, WithContentionAlert(150*time.Millisecond, 0), OnContention(func(a ContentionAlert) {
		select {
		case alerts <- a:
		default:
		}
	}))
	lock := mustLock(t, c, uniqueName(t))
	holder := NewOwner()
	defer mustAcquire(t, lock, holder).Release(bg)
	ctx, cancel := context.WithTimeout(bg, 600*time.Millisecond)
	defer cancel()
	waiter := NewOwner()
	_, err := lock.Acquire(ctx, waiter)
	wantErr(t, err, ErrTimeout)
	select {
	case a := <-alerts:
		if a.Name != lock.Name() || a.OwnerToken != waiter.Token() || a.Waited < 150*time.Millisecond ||
			len(a.Holders) != 1 || a.Holders[0].OwnerToken != holder.Token() {
			t.Fatalf("alert: %+v", a)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no contention alert")
	}
}

func TestLoopsLeakNoHandles(t *testing.T) {
	c := connect(t)
	run := func() {
		for i := 0; i < 100; i++ {
			rw, err := c.ReadWriteLock(uniqueName(t))
			if err != nil {
				t.Fatal(err)
			}
			owner, _ := OwnerFromToken(strings.Repeat("x", 10) + NewOwner().Token())
			hold := mustAcquire(t, rw.Write(), owner)
			if _, err := rw.Write().Inspect(bg); err != nil {
				t.Fatal(err)
			}
			if err := hold.Release(bg); err != nil {
				t.Fatal(err)
			}
		}
	}
	run() // warm up: the library's lazy statics
	settle := func() (uint64, uint64) {
		var handles, strs uint64
		eventually(2*time.Second, func() bool {
			runtime.GC()
			h, s, _ := liveObjects()
			same := h == handles && s == strs
			handles, strs = h, s
			return same
		})
		return handles, strs
	}
	handlesBefore, stringsBefore := settle()
	run()
	handlesAfter, stringsAfter := settle()
	if handlesAfter > handlesBefore || stringsAfter > stringsBefore {
		t.Fatalf("handles %d -> %d, strings %d -> %d", handlesBefore, handlesAfter, stringsBefore, stringsAfter)
	}
	if n := c.hooks.watched(); n != 0 {
		t.Fatalf("%d lost signals left", n)
	}
}
