package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
	redlock "github.com/redlock-sdk/redlock-go"
)

// lease is the fixed lease every library gets: no watchdog, no renewal.
const lease = 10 * time.Second

// redislockBackoff is redislock's retry strategy in the contended runs: the interval of the
// library's own retry example (its default is not to retry at all).
const redislockBackoff = 100 * time.Millisecond

// locker is one library's lock on one name, used the library's usual way.
type locker interface {
	// acquire blocks until the lock is held. A peer whose retry gives up (redsync after its
	// 32 tries, redislock at its deadline) is called again; giveUps counts those.
	acquire(ctx context.Context) error
	release(ctx context.Context) error
	giveUps() int64
	close()
}

type library struct {
	name string
	open func(ctx context.Context, url, name string) (locker, error)
}

var libraries = []library{
	{"redlock-go", openRedlockGo},
	{"redsync", openRedsync},
	{"redislock", openRedislock},
}

func libraryByName(name string) (library, error) {
	for _, l := range libraries {
		if l.name == name {
			return l, nil
		}
	}
	return library{}, fmt.Errorf("unknown library %q", name)
}

// -- redlock-go: Acquire with a context without deadline (waits as long as it takes, woken by the
// core's notifications), a fixed lease, one owner per holder (process).

type redlockGo struct {
	client *redlock.Client
	lock   *redlock.Lock
	owner  *redlock.Owner
	hold   *redlock.Hold
}

func openRedlockGo(ctx context.Context, url, name string) (locker, error) {
	client, err := redlock.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	lock, err := client.Lock("bench-go:" + name)
	if err != nil {
		client.Close()
		return nil, err
	}
	return &redlockGo{client: client, lock: lock, owner: redlock.NewOwner()}, nil
}

func (r *redlockGo) acquire(ctx context.Context) error {
	hold, err := r.lock.Acquire(ctx, r.owner, redlock.WithLease(lease))
	if err != nil {
		return err
	}
	r.hold = hold
	return nil
}

func (r *redlockGo) release(ctx context.Context) error {
	err := r.hold.Release(ctx)
	r.hold = nil
	return err
}

func (r *redlockGo) giveUps() int64 { return 0 }
func (r *redlockGo) close()         { r.client.Close() }

// -- redsync v4: one go-redis v9 client as its only pool; NewMutex with WithExpiry(lease) and
// otherwise the defaults (32 tries, 50..250 ms random delay between them, SET NX PX, release
// by script).

type redsyncLock struct {
	client *goredislib.Client
	mutex  *redsync.Mutex
	gaveUp atomic.Int64
}

func newGoRedis(url string) (*goredislib.Client, error) {
	opts, err := goredislib.ParseURL(url)
	if err != nil {
		return nil, err
	}
	return goredislib.NewClient(opts), nil
}

func openRedsync(_ context.Context, url, name string) (locker, error) {
	client, err := newGoRedis(url)
	if err != nil {
		return nil, err
	}
	rs := redsync.New(goredis.NewPool(client))
	return &redsyncLock{client: client, mutex: rs.NewMutex("bench-redsync:"+name, redsync.WithExpiry(lease))}, nil
}

func (r *redsyncLock) acquire(ctx context.Context) error {
	for {
		err := r.mutex.LockContext(ctx)
		if err == nil {
			return nil
		}
		// Out of tries: ErrFailed, or the last try's ErrTaken.
		var taken *redsync.ErrTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
			r.gaveUp.Add(1)
			continue
		}
		return err
	}
}

func (r *redsyncLock) release(ctx context.Context) error {
	ok, err := r.mutex.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock reported not held")
	}
	return err
}

func (r *redsyncLock) giveUps() int64 { return r.gaveUp.Load() }
func (r *redsyncLock) close()         { r.client.Close() }

// -- bsm/redislock: Obtain(key, lease) through a go-redis v9 client, with
// LinearBackoff(100ms) as its retry strategy (no limit; Obtain itself ends the wait after
// the ttl when the context has no deadline).

type redislockLock struct {
	client *goredislib.Client
	locker *redislock.Client
	key    string
	lock   *redislock.Lock
	opts   *redislock.Options
	gaveUp atomic.Int64
}

func openRedislock(_ context.Context, url, name string) (locker, error) {
	client, err := newGoRedis(url)
	if err != nil {
		return nil, err
	}
	return &redislockLock{
		client: client,
		locker: redislock.New(client),
		key:    "bench-redislock:" + name,
		opts:   &redislock.Options{RetryStrategy: redislock.LinearBackoff(redislockBackoff)},
	}, nil
}

func (r *redislockLock) acquire(ctx context.Context) error {
	for {
		lock, err := r.locker.Obtain(ctx, r.key, lease, r.opts)
		if err == nil {
			r.lock = lock
			return nil
		}
		if ctx.Err() == nil && (errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) {
			r.gaveUp.Add(1)
			continue
		}
		return err
	}
}

func (r *redislockLock) release(ctx context.Context) error {
	err := r.lock.Release(ctx)
	r.lock = nil
	return err
}

func (r *redislockLock) giveUps() int64 { return r.gaveUp.Load() }
func (r *redislockLock) close()         { r.client.Close() }
