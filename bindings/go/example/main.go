// Command example runs the seeds' scenarios with the Go binding, against the Redis given as the
// first argument (default redis://127.0.0.1:6379):
//
//  1. a read/write lock taken by one instance and released by another that was handed the owner
//     token (seed 000: "lock and unlock may run on different instances"), then shared by readers;
//  2. five goroutines increment one counter under the lock: no update is lost;
//  3. a wait cut short by its context.
//
// Run: go run ./example redis://127.0.0.1:6379
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	redlock "github.com/redlock-sdk/redlock-go"
)

func main() {
	url := "redis://127.0.0.1:6379"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	ctx := context.Background()
	if err := run(ctx, url); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string) error {
	instanceA, err := redlock.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer instanceA.Close()
	instanceB, err := redlock.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer instanceB.Close()

	if err := handOver(ctx, instanceA, instanceB); err != nil {
		return err
	}
	if err := countTogether(ctx, instanceA); err != nil {
		return err
	}
	return waitWithADeadline(ctx, instanceA)
}

func handOver(ctx context.Context, a, b *redlock.Client) error {
	rwA, err := a.ReadWriteLock("example:inventory")
	if err != nil {
		return err
	}
	rwB, err := b.ReadWriteLock("example:inventory")
	if err != nil {
		return err
	}
	writer := redlock.NewOwner()
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// A fixed lease for a hold handed over: A's watchdog would report a watched hold that B
	// releases as lost (it cannot tell that release from a loss).
	hold, err := rwA.Write().Acquire(waitCtx, writer, redlock.WithLease(30*time.Second))
	if err != nil {
		return err
	}
	fmt.Printf("A holds the write lock: fencing token %d, owner token %s\n", hold.FencingToken(), writer.Token())

	// B got the token (a queue message, an HTTP header...): presenting it makes B the owner.
	same, err := redlock.OwnerFromToken(writer.Token())
	if err != nil {
		return err
	}
	if _, err := rwB.Write().Release(ctx, same); err != nil {
		return err
	}
	fmt.Println("B released A's write lock with the token")

	readA, err := rwA.Read().TryAcquire(ctx, redlock.NewOwner(), redlock.WithLease(10*time.Second))
	if err != nil {
		return err
	}
	readB, err := rwB.Read().TryAcquire(ctx, redlock.NewOwner(), redlock.WithLease(10*time.Second))
	if err != nil {
		return err
	}
	_, err = rwA.Write().TryAcquire(ctx, redlock.NewOwner())
	fmt.Printf("two readers hold it; a writer trying now gets: %v\n", err)
	info, err := rwA.Read().Inspect(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("inspect: mode %v, %d holders, last fencing token %d\n", info.Mode, info.HolderCount, info.LastFencingToken)
	return errors.Join(readA.Release(ctx), readB.Release(ctx))
}

func countTogether(ctx context.Context, client *redlock.Client) error {
	lock, err := client.Lock("example:counter")
	if err != nil {
		return err
	}
	const goroutines, rounds = 5, 20
	// The counter stands for a shared resource: read, then written later. Only the distributed
	// lock keeps updates from getting lost (atomic loads and stores just keep Go's race detector
	// quiet: it cannot see an exclusion that goes through Redis).
	var counter atomic.Int64
	locker := lock.Locker()
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				locker.Lock()
				seen := counter.Load()
				time.Sleep(time.Millisecond) // a read-modify-write that takes time
				counter.Store(seen + 1)
				locker.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d goroutines x %d increments under the lock: counter = %d (expected %d)\n",
		goroutines, rounds, counter.Load(), goroutines*rounds)
	if counter.Load() != goroutines*rounds {
		return errors.New("an update was lost")
	}
	return nil
}

func waitWithADeadline(ctx context.Context, client *redlock.Client) error {
	lock, err := client.Lock("example:busy")
	if err != nil {
		return err
	}
	hold, err := lock.TryAcquire(ctx, redlock.NewOwner())
	if err != nil {
		return err
	}
	defer hold.Release(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = lock.Acquire(waitCtx, redlock.NewOwner())
	fmt.Printf("waiting 200ms for a held lock: ErrTimeout=%v DeadlineExceeded=%v\n",
		errors.Is(err, redlock.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	return nil
}
