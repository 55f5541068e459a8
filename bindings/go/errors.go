package redlock

/*
#include "redlock.h"
*/
import "C"

import (
	"context"
	"errors"
)

// The error kinds of the lock contract, the same in every redlock-sdk language. Every error this
// package returns matches exactly one of them with errors.Is.
var (
	// ErrInvalidArgument: a bad name, token, duration or option; nothing was sent to Redis.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	// ErrTimeout: the wait (the context's deadline, or a TryAcquire) ended before the lock was
	// acquired. When the deadline ended it, the error also matches context.DeadlineExceeded.
	ErrTimeout = errors.New("redlock: timed out waiting for the lock")
	// ErrNotHeld: the owner does not hold the lock (never held, released, or expired).
	ErrNotHeld = errors.New("redlock: the lock is not held by this owner")
	// ErrLockLost: the watchdog kept the hold alive and Redis no longer has it.
	ErrLockLost = errors.New("redlock: the lock was lost")
	// ErrUpgradeNotAllowed: a reader asked for the write lock while still reading.
	ErrUpgradeNotAllowed = errors.New("redlock: cannot upgrade a read hold to a write hold")
	// ErrConnection: Redis could not be reached, did not answer in time, or refused the
	// credentials or TLS.
	ErrConnection = errors.New("redlock: connection error")
	// ErrRedis: Redis answered with an error, or with a reply the library cannot read (a
	// name's keys written by something else: WRONGTYPE, FOREIGNKEY).
	ErrRedis = errors.New("redlock: redis error")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("redlock: client is closed")
	// ErrCanceled: the context was cancelled while waiting; the error also matches
	// context.Canceled.
	ErrCanceled = errors.New("redlock: wait canceled")
	// ErrInternal: a bug in the library; the message says where.
	ErrInternal = errors.New("redlock: internal error")
)

// Error is what every failing call returns: the operation, the kind (one of the Err* values
// above, for errors.Is) and the library's message.
type Error struct {
	Op      string // "acquire", "release", "connect", ...
	Kind    error  // one of the Err* sentinels
	Message string // the library's explanation
	cause   error  // context.Canceled or context.DeadlineExceeded, when the context ended a wait
}

func (e *Error) Error() string {
	return "redlock: " + e.Op + ": " + e.Message
}

// Unwrap gives the kind and, for waits ended by the context, the context's error.
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Kind, e.cause}
	}
	return []error{e.Kind}
}

func newError(op string, status C.rl_status, message string) *Error {
	kind := ErrInternal
	switch status {
	case C.RL_INVALID_ARGUMENT, C.RL_INVALID_HANDLE:
		// A bad handle can only come from this package misusing the ABI: report it as an
		// invalid argument with the library's precise message.
		kind = ErrInvalidArgument
	case C.RL_TIMEOUT:
		kind = ErrTimeout
	case C.RL_NOT_HELD:
		kind = ErrNotHeld
	case C.RL_LOCK_LOST:
		kind = ErrLockLost
	case C.RL_UPGRADE_NOT_ALLOWED:
		kind = ErrUpgradeNotAllowed
	case C.RL_CONNECTION:
		kind = ErrConnection
	case C.RL_REDIS:
		kind = ErrRedis
	case C.RL_CLOSED:
		kind = ErrClosed
	case C.RL_CANCELLED:
		kind = ErrCanceled
	}
	if message == "" {
		message = kind.Error()
	}
	return &Error{Op: op, Kind: kind, Message: message}
}

// contextError is the error for a wait the context ended (before or during the call).
func contextError(op string, ctxErr error) *Error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return &Error{Op: op, Kind: ErrTimeout, Message: "the context's deadline passed before the lock was acquired", cause: ctxErr}
	}
	return &Error{Op: op, Kind: ErrCanceled, Message: "the context was cancelled while waiting", cause: ctxErr}
}
