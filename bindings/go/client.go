package redlock

/*
#include "redlock.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Client is a connection to one Redis server for taking locks: one command connection, one
// pub/sub connection and one watchdog, shared by every lock made from it. Safe for concurrent
// use; make one per process and Redis.
type Client struct {
	h         C.rl_client
	id        uintptr
	hooks     *clientHooks
	closeOnce sync.Once
	closeErr  error
}

var nextClientID atomic.Uintptr

// Connect connects to Redis at url (redis://[user:password@]host[:port][/db], rediss://... for
// TLS). It blocks until connected or the connect timeout (or ctx's deadline, if sooner) passes;
// an unreachable Redis is ErrConnection (running into ctx's deadline too: that error also
// matches context.DeadlineExceeded). Cancelling ctx ends the connect at once with its error.
func Connect(ctx context.Context, url string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, contextError("connect", err)
	}
	var s settings
	for _, opt := range opts {
		opt(&s)
	}
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); s.connectTimeout == 0 || left < s.connectTimeout {
			s.connectTimeout = max(left, time.Millisecond)
		}
	}
	cURL, err := cString("url", url)
	if err != nil {
		return nil, err
	}
	defer freeCString(cURL)

	var options C.rl_options
	if err := call("connect", func(e *C.rl_error) C.rl_status { return C.rl_options_new(&options, e) }); err != nil {
		return nil, err
	}
	defer C.rl_options_free(&options, nil)
	c := &Client{
		id: nextClientID.Add(1),
		hooks: &clientHooks{
			lost:         make(map[lostKey][]*lostSignal),
			onLockLost:   s.onLockLost,
			onContention: s.onContention,
		},
	}
	if err := s.apply(options); err != nil {
		return nil, err
	}
	if err := setCallbacks(options, c.id, s.onContention != nil); err != nil {
		return nil, err
	}
	cancel, release, err := cancelFor(ctx, "connect")
	if err != nil {
		return nil, err
	}
	defer release()
	hooksByClient.Store(c.id, c.hooks)
	err = call("connect", func(e *C.rl_error) C.rl_status {
		return C.rl_client_connect_ex(cURL, options, cancel, &c.h, e)
	})
	if err != nil {
		hooksByClient.Delete(c.id)
		return nil, connectError(ctx, err)
	}
	runtime.AddCleanup(c, closeClient, clientRef{uint64(c.h.id), c.id})
	return c, nil
}

// apply hands the settings to the library, which checks each one.
func (s *settings) apply(options C.rl_options) error {
	set := func(what string, d time.Duration, setter func(C.int64_t, *C.rl_error) C.rl_status) error {
		if d == 0 {
			return nil // not given: the library's default
		}
		ms, err := millis(what, d)
		if err != nil {
			return err
		}
		return call("connect", func(e *C.rl_error) C.rl_status { return setter(ms, e) })
	}
	var errs []error
	if s.prefix != nil {
		errs = append(errs, func() error {
			prefix, err := cString("prefix", *s.prefix)
			if err != nil {
				return err
			}
			defer freeCString(prefix)
			return call("connect", func(e *C.rl_error) C.rl_status { return C.rl_options_set_prefix(options, prefix, e) })
		}())
	}
	errs = append(errs,
		set("lease", s.lease, func(ms C.int64_t, e *C.rl_error) C.rl_status { return C.rl_options_set_lease_ms(options, ms, e) }),
		set("command timeout", s.commandTimeout, func(ms C.int64_t, e *C.rl_error) C.rl_status {
			return C.rl_options_set_command_timeout_ms(options, ms, e)
		}),
		set("connect timeout", s.connectTimeout, func(ms C.int64_t, e *C.rl_error) C.rl_status {
			return C.rl_options_set_connect_timeout_ms(options, ms, e)
		}),
		set("recheck interval", s.recheckInterval, func(ms C.int64_t, e *C.rl_error) C.rl_status {
			return C.rl_options_set_recheck_interval_ms(options, ms, e)
		}),
	)
	if s.watchdog != nil {
		on := C.bool(*s.watchdog)
		errs = append(errs, call("connect", func(e *C.rl_error) C.rl_status { return C.rl_options_set_watchdog(options, on, e) }))
	}
	if s.alertSet {
		after, attempts := C.int64_t(-1), C.int64_t(-1)
		if s.alertAfter != 0 {
			ms, err := millis("contention alert wait", s.alertAfter)
			if err != nil {
				return err
			}
			after = ms
		}
		if s.alertAttempts != 0 {
			attempts = C.int64_t(s.alertAttempts) // negative: refused by the library
		}
		errs = append(errs, call("connect", func(e *C.rl_error) C.rl_status {
			return C.rl_options_set_contention_alert(options, after, attempts, e)
		}))
	}
	// The first failure is the one to report; errors.Join would bury it in a list.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

type clientRef struct {
	handle uint64
	id     uintptr
}

// closeClient closes and frees a client's handle and forgets its hooks. Once the library's
// close returns no callback of the client runs, so the hooks can go.
func closeClient(ref clientRef) {
	h := C.rl_client{id: C.uint64_t(ref.handle)}
	C.rl_client_free(&h, nil)
	if hooks, ok := hooksByClient.LoadAndDelete(ref.id); ok {
		hooks.(*clientHooks).closeAll()
	}
}

// Close closes the client: the watchdog stops, waiting acquires end with ErrClosed, and later
// calls fail with ErrClosed. Holds stay in Redis until their lease ends: release them first for
// a clean exit. Closing twice is harmless. A Client that Connect did not return (the zero
// value) has nothing to close: ErrInvalidArgument.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = call("close", func(e *C.rl_error) C.rl_status { return C.rl_client_close(c.h, e) })
		hooksByClient.Delete(c.id)
		if c.hooks != nil { // nil in a Client that Connect did not return
			c.hooks.closeAll()
		}
	})
	return c.closeErr
}

// Lock returns the exclusive reentrant lock name (1..1024 bytes of UTF-8, any characters). It
// is the same resource as ReadWriteLock(name).Write(). No Redis call is made.
func (c *Client) Lock(name string) (*Lock, error) {
	cName, err := cString("name", name)
	if err != nil {
		return nil, err
	}
	defer freeCString(cName)
	var h C.rl_lock
	err = call("lock", func(e *C.rl_error) C.rl_status { return C.rl_client_lock(c.h, cName, &h, e) })
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newLock(c, h, name, Write), nil
}

// ReadWriteLock returns the read/write lock name; see Lock for the rules on names.
func (c *Client) ReadWriteLock(name string) (*ReadWriteLock, error) {
	cName, err := cString("name", name)
	if err != nil {
		return nil, err
	}
	defer freeCString(cName)
	var rw C.rl_rwlock
	err = call("read/write lock", func(e *C.rl_error) C.rl_status {
		return C.rl_client_read_write_lock(c.h, cName, &rw, e)
	})
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	// The two views hold the read/write lock alive in the library; its own handle can go.
	defer C.rl_rwlock_free(&rw, nil)
	var read, write C.rl_lock
	if err := call("read view", func(e *C.rl_error) C.rl_status { return C.rl_rwlock_read(rw, &read, e) }); err != nil {
		return nil, err
	}
	if err := call("write view", func(e *C.rl_error) C.rl_status { return C.rl_rwlock_write(rw, &write, e) }); err != nil {
		C.rl_lock_free(&read, nil)
		return nil, err
	}
	return &ReadWriteLock{read: newLock(c, read, name, Read), write: newLock(c, write, name, Write)}, nil
}

// Inspect returns a snapshot of lock name (see LockInfo).
func (c *Client) Inspect(ctx context.Context, name string) (*LockInfo, error) {
	lock, err := c.Lock(name)
	if err != nil {
		return nil, err
	}
	return lock.Inspect(ctx)
}

// ForceUnlock clears lock name whoever holds it and wakes its waiters; it reports whether the
// lock was held. An admin call: holders find out at their next renewal.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	lock, err := c.Lock(name)
	if err != nil {
		return false, err
	}
	return lock.ForceUnlock(ctx)
}

// checkContext refuses to start a call whose context has already ended.
func checkContext(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return contextError(op, err)
	}
	return nil
}

// connectError is a failed connect's error. The context's deadline is the connect timeout
// (whichever of the two timers fires first): running into it is ErrConnection, as the
// timeout's end is, matching context.DeadlineExceeded too. A cancelled ctx is its own error.
func connectError(ctx context.Context, err error) error {
	var e *Error
	if !errors.As(err, &e) || ctx.Err() == nil {
		return err
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && (errors.Is(e.Kind, ErrCanceled) || errors.Is(e.Kind, ErrConnection)):
		return &Error{Op: "connect", Kind: ErrConnection, Message: "not connected before the context's deadline", cause: context.DeadlineExceeded}
	case errors.Is(e.Kind, ErrCanceled):
		return contextError("connect", ctx.Err())
	}
	return err
}
