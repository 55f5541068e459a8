package redlock

/*
#include "redlock.h"
*/
import "C"

import (
	"encoding/json"
	"sync"
	"time"
	"unsafe"
)

// clientHooks holds what the library's callbacks reach for one client: the lost signals of its
// holds and the user's callbacks. Callbacks find it by the client's id, never by a Go pointer
// handed to C.
type clientHooks struct {
	mu           sync.Mutex
	lost         map[lostKey][]*lostSignal
	closed       bool // set by closeAll: no more signals are kept
	onLockLost   func(LockLostEvent)
	onContention func(ContentionAlert)
}

// hooksByClient maps client ids to their hooks; a callback for a client that is gone finds
// nothing and does nothing.
var hooksByClient sync.Map // uintptr -> *clientHooks

func lookupHooks(client unsafe.Pointer) *clientHooks {
	hooks, ok := hooksByClient.Load(uintptr(client))
	if !ok {
		return nil
	}
	return hooks.(*clientHooks)
}

//export redlockGoLockLost
func redlockGoLockLost(client unsafe.Pointer, event *C.rl_lock_lost_event) {
	hooks := lookupHooks(client)
	if hooks == nil {
		return
	}
	ev := LockLostEvent{
		Name:       C.GoString(event.name),
		Mode:       Mode(event.mode),
		OwnerToken: C.GoString(event.owner_token),
	}
	hooks.settleKey(lostKey{ev.Name, ev.Mode, ev.OwnerToken})
	if hooks.onLockLost != nil {
		// In a goroutine: the library's thread must not wait for user code.
		go hooks.onLockLost(ev)
	}
}

//export redlockGoContention
func redlockGoContention(client unsafe.Pointer, alert *C.rl_contention_alert) {
	hooks := lookupHooks(client)
	if hooks == nil || hooks.onContention == nil {
		return
	}
	var holders []rawHolder
	// The library writes this JSON; if it ever cannot be read, the alert still goes out.
	_ = json.Unmarshal([]byte(C.GoString(alert.holders_json)), &holders)
	ev := ContentionAlert{
		Name:           C.GoString(alert.name),
		Mode:           Mode(alert.mode),
		OwnerToken:     C.GoString(alert.owner_token),
		Waited:         time.Duration(alert.waited_ms) * time.Millisecond,
		FailedAttempts: uint64(alert.failed_attempts),
		Holders:        convertHolders(holders),
	}
	go hooks.onContention(ev)
}
