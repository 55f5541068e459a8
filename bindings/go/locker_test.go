package redlock

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A Locker whose Unlock Redis refused (here -BUSY: a foreign script past busy-reply-threshold)
// panics, and keeps the hold: the lock is still held, kept alive by the watchdog, and the
// Unlock called again once Redis works releases it.
func TestALockerKeepsAHoldWhoseReleaseRedisRefused(t *testing.T) {
	c := connect(t)
	l := mustLock(t, c, uniqueName(t))
	locker := l.Locker()
	locker.Lock()

	if reply, err := redisCommand("CONFIG", "SET", "busy-reply-threshold", "100"); reply != "+OK" {
		t.Fatalf("CONFIG SET: %q %v", reply, err)
	}
	t.Cleanup(func() { _, _ = redisCommand("CONFIG", "SET", "busy-reply-threshold", "5000") })
	scriptEnded := make(chan struct{})
	go func() {
		_, _ = redisCommand("EVAL", "while true do end", "0")
		close(scriptEnded)
	}()
	busy := eventually(5*time.Second, func() bool {
		reply, _ := redisCommand("GET", "x")
		return strings.HasPrefix(reply, "-BUSY")
	})
	refused := func() (recovered any) {
		defer func() { recovered = recover() }()
		locker.Unlock()
		return nil
	}()
	_, _ = redisCommand("SCRIPT", "KILL")
	<-scriptEnded
	if !busy || !strings.Contains(fmt.Sprint(refused), "BUSY") {
		t.Fatalf("busy: %v; Unlock during the script: %v", busy, refused)
	}

	locker.Unlock() // the hold it kept
	if mustOK(t)(l.IsLocked(bg)) {
		t.Fatal("the lock is still held after the second Unlock")
	}
}
