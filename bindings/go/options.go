package redlock

import "time"

// Option changes a setting of Connect.
type Option func(*settings)

type settings struct {
	prefix          *string
	lease           time.Duration
	commandTimeout  time.Duration
	connectTimeout  time.Duration
	recheckInterval time.Duration
	watchdog        *bool
	alertSet        bool
	alertAfter      time.Duration // 0: never by time
	alertAttempts   int           // 0: no limit
	onLockLost      func(LockLostEvent)
	onContention    func(ContentionAlert)
}

// WithPrefix sets the prefix of every Redis key and channel (default "redlock"; 1..128 bytes,
// no '{' or '}', not ending in ":fence").
func WithPrefix(prefix string) Option { return func(s *settings) { s.prefix = &prefix } }

// WithDefaultLease sets the default lease (default 30s), which is also the watchdog's renewal lease:
// holds without a lease of their own are renewed every lease/3.
func WithDefaultLease(lease time.Duration) Option { return func(s *settings) { s.lease = lease } }

// WithCommandTimeout bounds every Redis call (default 3s); a Redis that does not answer in time
// is ErrConnection.
func WithCommandTimeout(d time.Duration) Option { return func(s *settings) { s.commandTimeout = d } }

// WithConnectTimeout bounds connecting (default 5s). A deadline of Connect's context that is
// sooner takes its place.
func WithConnectTimeout(d time.Duration) Option { return func(s *settings) { s.connectTimeout = d } }

// WithRecheckInterval sets the longest a waiter sleeps between attempts when no notification
// arrives (default 250ms): what a lost pub/sub message can cost at most.
func WithRecheckInterval(d time.Duration) Option {
	return func(s *settings) { s.recheckInterval = d }
}

// WithWatchdog turns the watchdog on (default) or off. Off: holds taken without a lease get the
// default lease and are not renewed.
func WithWatchdog(on bool) Option { return func(s *settings) { s.watchdog = &on } }

// WithContentionAlert raises a contention alert (a log line in the core, and OnContention) when
// one acquire has waited `after` (0: never by time; default 30s) or failed `attempts` attempts
// (0: no limit, the default).
func WithContentionAlert(after time.Duration, attempts int) Option {
	return func(s *settings) {
		s.alertSet, s.alertAfter, s.alertAttempts = true, after, attempts
	}
}

// OnLockLost is called (in a new goroutine) when a hold kept alive by the watchdog is found
// gone from Redis. The hold's Lost channel is closed as well.
func OnLockLost(f func(LockLostEvent)) Option { return func(s *settings) { s.onLockLost = f } }

// OnContention is called (in a new goroutine) once per waiting acquire that passes the
// contention threshold (see WithContentionAlert), with the lock's holders.
func OnContention(f func(ContentionAlert)) Option {
	return func(s *settings) { s.onContention = f }
}

// LockLostEvent tells which hold was lost.
type LockLostEvent struct {
	Name       string
	Mode       Mode
	OwnerToken string
}

// ContentionAlert tells which waiter passed the threshold, and who holds the lock.
type ContentionAlert struct {
	Name           string
	Mode           Mode
	OwnerToken     string // the waiting owner
	Waited         time.Duration
	FailedAttempts uint64
	Holders        []HolderInfo
}
