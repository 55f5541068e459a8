package redlock

/*
#include "redlock.h"
*/
import "C"

import "sync"

// lostKey names watched holds the way the library's lock-lost events do: a name, a mode and an
// owner. One key may name more than one hold: a newer one of the owner, and an older one the
// library found gone (and reports lost) when the newer was taken.
type lostKey struct {
	name  string
	mode  Mode
	token string
}

// lostSignal is closed when the library finds the hold gone. Reentrant holds of one owner share
// one signal, as they share one hold in Redis (one fencing token). Which hold is lost, only the
// library knows for sure, so the signal keeps the library's handle of its hold and asks it.
type lostSignal struct {
	ch    chan struct{}
	once  sync.Once
	fence uint64
	hold  C.rl_hold
}

func (s *lostSignal) fire() { s.once.Do(func() { close(s.ch) }) }

// isLost asks the library whether the hold was found gone (no I/O).
func (s *lostSignal) isLost() bool {
	var lost C.bool
	return C.rl_hold_is_lost(s.hold, &lost, nil) == C.RL_OK && bool(lost)
}

// isWatched asks the library whether its watchdog still keeps the hold (no I/O): once not, the
// hold was released, lost or its client closed, and isLost no longer changes.
func (s *lostSignal) isWatched() bool {
	var watched C.bool
	return C.rl_hold_is_watched(s.hold, &watched, nil) == C.RL_OK && bool(watched)
}

// track returns the signal of a watched hold just taken (its fencing token and the library's
// handle, which the signal now owns): a re-entry joins the signal of its hold.
func (h *clientHooks) track(key lostKey, fence uint64, hold C.rl_hold) *lostSignal {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.settle(key, false) {
		if s.fence == fence {
			C.rl_hold_free(&hold, nil)
			return s
		}
	}
	s := &lostSignal{ch: make(chan struct{}), fence: fence, hold: hold}
	// Not kept (lost already, released by a call heard first, or the client closed meanwhile):
	// nothing will report it later.
	if !s.isWatched() || h.closed {
		if s.isLost() {
			s.fire()
		}
		C.rl_hold_free(&s.hold, nil)
		return s
	}
	h.lost[key] = append(h.lost[key], s)
	return s
}

// settleKey fires the signals of key's holds that the library found gone and drops those it no
// longer keeps (after a loss event, or a release of key's owner, which may have ended a hold).
// A hold the library still keeps keeps its signal, whichever goroutine released what.
func (h *clientHooks) settleKey(key lostKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settle(key, false)
}

// closeAll settles every signal when the client is closed: the library's watchdog has stopped
// and sets every kept hold's lost signal, so waits on Lost end instead of hanging.
func (h *clientHooks) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for key := range h.lost {
		h.settle(key, true)
	}
}

// settle fires the signals of key whose hold the library found gone, drops those it no longer
// keeps (all of them when all is set), and returns those kept. Called with h.mu held.
func (h *clientHooks) settle(key lostKey, all bool) []*lostSignal {
	signals := h.lost[key]
	kept := signals[:0]
	for _, s := range signals {
		if !all && s.isWatched() {
			kept = append(kept, s)
			continue
		}
		if s.isLost() {
			s.fire()
		}
		C.rl_hold_free(&s.hold, nil)
	}
	if len(kept) == 0 {
		delete(h.lost, key)
	} else {
		h.lost[key] = kept
	}
	return kept
}

// watched reports how many holds have a lost signal (for leak checks in tests).
func (h *clientHooks) watched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, signals := range h.lost {
		n += len(signals)
	}
	return n
}
