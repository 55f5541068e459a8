package redlock

import (
	"testing"
	"time"
)

// Uncontended acquire+release cycles through cgo and the C ABI (compare with
// bindings/c/bench and ffi/examples/bench_blocking.rs: scripts/bench-c-go.sh).
func BenchmarkAcquireRelease(b *testing.B) {
	c := connect(b)
	lock := mustLock(b, c, "bench:go")
	owner := NewOwner()
	for i := 0; i < 200; i++ { // warm-up, as in the other languages' benches
		cycle(b, lock, owner)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cycle(b, lock, owner)
	}
}

func cycle(b *testing.B, lock *Lock, owner *Owner) {
	if _, err := lock.TryAcquire(bg, owner, WithLease(30*time.Second)); err != nil {
		b.Fatal(err)
	}
	if _, err := lock.Release(bg, owner); err != nil {
		b.Fatal(err)
	}
}

// One cgo call into the ABI that does no I/O: what Go and the C layer add per call.
func BenchmarkABICallWithoutIO(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, _, err := liveObjects(); err != nil {
			b.Fatal(err)
		}
	}
}
