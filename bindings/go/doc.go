// Package redlock is the Go binding of redlock-sdk: Redis distributed locks owned by tokens,
// exclusive (reentrant) and read/write, with a watchdog, fencing tokens and cancellable waits.
//
// It calls libredlock, the one Rust core every redlock-sdk language shares, through its C ABI
// (cgo, found with pkg-config: see README.md for building and linking).
//
// Ownership is explicit: an [Owner] is a token, and whoever presents the token is the owner, in
// any goroutine, process or language. Give each independent holder its own owner; two goroutines
// sharing one owner re-enter each other's holds instead of excluding each other.
//
//	client, err := redlock.Connect(ctx, "redis://127.0.0.1:6379")
//	lock, err := client.Lock("orders:42")
//	owner := redlock.NewOwner()
//	ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // the wait
//	defer cancel()
//	hold, err := lock.Acquire(ctx, owner)
//	if errors.Is(err, redlock.ErrTimeout) { ... }
//	defer hold.Release(context.Background())
//	write(resource, hold.FencingToken())
//
// The context of Acquire bounds the wait: its deadline is the wait (no deadline: wait as long as
// it takes), and cancelling it ends the wait in the core at once, leaving nothing in Redis.
// Every other call is bounded by the client's command timeout.
//
// Fencing tokens strictly increase per name for new write (and exclusive) holds. They can move
// backwards only if Redis loses data: a failover to a replica that missed the increment, or a
// restart without persistence. They stop at 2^53 - 1, the last that Redis' Lua counts exactly:
// past it, acquires in that hash slot fail with ErrRedis (FENCESPENT) instead of repeating one.
package redlock
