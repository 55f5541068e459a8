package redlock

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A process killed while it waits must not be handed the lock when it is released: Redis sees
// its connections close, so the release passes over its announcement instead of granting it a
// whole lease that nobody would ever release. The announcement leaves the queue at once, or,
// if the process died before it listened (it may have announced itself only once), when that
// announcement runs out (a second by default).
func TestAProcessKilledWhileWaitingIsNotHandedTheLock(t *testing.T) {
	c := connect(t)
	lock := mustLock(t, c, uniqueName(t))
	holder := mustAcquire(t, lock, NewOwner())

	waiter := exec.Command(os.Args[0], "-test.run=^TestHelperProcessThatWaits$")
	waiter.Env = append(os.Environ(), "REDLOCK_BENCH_URL="+redisURL, "REDLOCK_WAIT_ON="+lock.Name())
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool {
		info, err := lock.Inspect(bg)
		return err == nil && info.WaitingWriters == 1
	}) {
		_ = waiter.Process.Kill()
		_ = waiter.Wait()
		t.Fatal("the other process never announced itself as waiting")
	}
	if err := waiter.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = waiter.Wait()
	time.Sleep(50 * time.Millisecond) // Redis reads the closed sockets

	if err := holder.Release(bg); err != nil {
		t.Fatal(err)
	}
	if locked, err := lock.IsLocked(bg); err != nil || locked {
		t.Fatalf("the lock went to the killed process (locked %v, err %v)", locked, err)
	}
	if !eventually(5*time.Second, func() bool {
		info, err := lock.Inspect(bg)
		return err == nil && info.WaitingWriters == 0
	}) {
		t.Fatal("the killed process is still queued")
	}
	mustAcquire(t, lock, NewOwner()).Release(bg)
}

// Not a test on its own: the process TestAProcessKilledWhileWaitingIsNotHandedTheLock kills.
func TestHelperProcessThatWaits(t *testing.T) {
	name := os.Getenv("REDLOCK_WAIT_ON")
	if name == "" {
		t.Skip("started by TestAProcessKilledWhileWaitingIsNotHandedTheLock only")
	}
	lock := mustLock(t, connect(t), name)
	_, err := lock.Acquire(bg, NewOwner())
	fmt.Println("the wait ended, which it must not:", err)
	os.Exit(3)
}
