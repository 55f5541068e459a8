package redlock

import (
	"testing"
	"time"
)

// Lock calls yield to Go's scheduler once per yieldEvery, not on every call (see yieldNow).
func TestLockCallsYieldOncePerInterval(t *testing.T) {
	yieldNow()
	time.Sleep(yieldEvery)
	yieldNow() // due: yields and restarts the interval
	first := lastYield.Load()
	changes := 0
	for start := time.Now(); time.Since(start) < yieldEvery/2; {
		before := lastYield.Load()
		yieldNow()
		if lastYield.Load() != before {
			changes++
		}
	}
	if changes != 0 {
		t.Fatalf("yielded %d more times within half an interval", changes)
	}
	time.Sleep(yieldEvery)
	yieldNow()
	if lastYield.Load() == first {
		t.Fatal("no yield once the interval had passed")
	}
}
