package redlock

import "sync"

// lostKey names one watched hold the way the library's lock-lost events do.
type lostKey struct {
	name  string
	mode  Mode
	token string
}

// lostSignal is closed when the watchdog finds the hold gone. Reentrant holds of one owner
// share one signal, as they share one hold in Redis.
type lostSignal struct {
	ch   chan struct{}
	once sync.Once
}

func (s *lostSignal) fire() { s.once.Do(func() { close(s.ch) }) }

// track returns the signal of a watched hold, creating it for a first hold.
func (h *clientHooks) track(key lostKey) *lostSignal {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.lost[key]; ok {
		return s
	}
	s := &lostSignal{ch: make(chan struct{})}
	h.lost[key] = s
	return s
}

// signalLost fires and forgets the signal of a hold reported lost.
func (h *clientHooks) signalLost(key lostKey) {
	h.mu.Lock()
	s := h.lost[key]
	delete(h.lost, key)
	h.mu.Unlock()
	if s != nil {
		s.fire()
	}
}

// forget drops the signal of a hold that is no longer held (released, or found not held).
func (h *clientHooks) forget(key lostKey) {
	h.mu.Lock()
	delete(h.lost, key)
	h.mu.Unlock()
}

// watched reports how many holds have a lost signal (for leak checks in tests).
func (h *clientHooks) watched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lost)
}
