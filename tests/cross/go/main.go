// Command worker is the Go worker of the cross-language tests: it adapts the Go binding to the
// protocol of tests/cross/PROTOCOL.md and holds no lock logic of its own.
//
//	worker MODE REDIS_URL LOCK_NAME ARG...
//
//	mutex COUNTER_FILE SECTIONS RECORD_FILE
//	read  EVENT_LOG SECTIONS RECORD_FILE
//	write EVENT_LOG SECTIONS RECORD_FILE
//	hold TOKEN
//	release TOKEN
//	wait READY_FILE
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	redlock "github.com/redlock-sdk/redlock-go"
)

const (
	lang   = "go"
	prefix = "cross"

	holdLease    = 60 * time.Second // hold: a fixed lease, no watchdog
	waitRecheck  = 60 * time.Second // wait: only a notification can wake it quickly
	sectionSleep = 2 * time.Millisecond
)

const usage = `usage: worker MODE REDIS_URL LOCK_NAME ARG...
  mutex COUNTER_FILE SECTIONS RECORD_FILE
  read EVENT_LOG SECTIONS RECORD_FILE
  write EVENT_LOG SECTIONS RECORD_FILE
  hold TOKEN
  release TOKEN
  wait READY_FILE`

// modeArgs is how many arguments follow LOCK_NAME in each mode.
var modeArgs = map[string]int{
	"mutex": 3, "read": 3, "write": 3, "hold": 1, "release": 1, "wait": 1,
}

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "go worker: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("expected MODE REDIS_URL LOCK_NAME ARG...\n%s", usage)
	}
	mode, url, name, rest := args[0], args[1], args[2], args[3:]
	want, ok := modeArgs[mode]
	if !ok {
		return fmt.Errorf("unknown mode %q\n%s", mode, usage)
	}
	if len(rest) != want {
		return fmt.Errorf("mode %s takes %d argument(s) after LOCK_NAME, got %d\n%s", mode, want, len(rest), usage)
	}
	sections := 0
	if mode == "mutex" || mode == "read" || mode == "write" {
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 0 {
			return fmt.Errorf("SECTIONS must be a non-negative integer, got %q", rest[1])
		}
		sections = n
	}

	opts := []redlock.Option{redlock.WithPrefix(prefix)}
	if mode == "wait" {
		opts = append(opts, redlock.WithRecheckInterval(waitRecheck))
	}
	client, err := redlock.Connect(ctx, url, opts...)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}

	switch mode {
	case "mutex":
		err = runMutex(ctx, client, name, rest[0], sections, rest[2])
	case "read", "write":
		err = runReadWrite(ctx, client, name, mode == "write", rest[0], sections, rest[2])
	case "hold":
		err = runHold(ctx, client, name, rest[0])
	case "release":
		err = runRelease(ctx, client, name, rest[0])
	case "wait":
		err = runWait(ctx, client, name, rest[0])
	}
	if closeErr := client.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("close: %w", closeErr)
	}
	return err
}

// section acquires lock for owner (waiting as long as it takes), runs body with the hold's
// fencing token and the wait in microseconds, and releases the hold, also when body fails.
func section(ctx context.Context, lock *redlock.Lock, owner *redlock.Owner, body func(fencing uint64, waitUS int64) error) error {
	start := time.Now()
	hold, err := lock.Acquire(ctx, owner)
	waitUS := time.Since(start).Microseconds()
	if err != nil {
		return fmt.Errorf("acquire %s (%s): %w", lock.Name(), lock.Mode(), err)
	}
	bodyErr := body(hold.FencingToken(), waitUS)
	releaseErr := hold.Release(ctx)
	if bodyErr != nil {
		return bodyErr
	}
	if releaseErr != nil {
		return fmt.Errorf("release %s (%s): %w", lock.Name(), lock.Mode(), releaseErr)
	}
	return nil
}

func runMutex(ctx context.Context, client *redlock.Client, name, counterFile string, sections int, recordFile string) error {
	lock, err := client.Lock(name)
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	owner := redlock.NewOwner()
	for i := 0; i < sections; i++ {
		err := section(ctx, lock, owner, func(fencing uint64, waitUS int64) error {
			value, err := readCounter(counterFile)
			if err != nil {
				return err
			}
			value++
			if err := writeCounter(counterFile, value); err != nil {
				return err
			}
			return appendRecord(recordFile, value, fencing, waitUS)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func runReadWrite(ctx context.Context, client *redlock.Client, name string, write bool, eventLog string, sections int, recordFile string) error {
	rw, err := client.ReadWriteLock(name)
	if err != nil {
		return fmt.Errorf("read/write lock %s: %w", name, err)
	}
	lock, letter := rw.Read(), "R"
	if write {
		lock, letter = rw.Write(), "W"
	}
	pid := os.Getpid()
	owner := redlock.NewOwner()
	for i := 1; i <= sections; i++ {
		err := section(ctx, lock, owner, func(fencing uint64, waitUS int64) error {
			if err := appendLine(eventLog, fmt.Sprintf("enter %s %d\n", letter, pid)); err != nil {
				return err
			}
			time.Sleep(sectionSleep)
			if err := appendLine(eventLog, fmt.Sprintf("exit %s %d\n", letter, pid)); err != nil {
				return err
			}
			return appendRecord(recordFile, int64(i), fencing, waitUS)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func runHold(ctx context.Context, client *redlock.Client, name, token string) error {
	lock, owner, err := lockAndOwner(client, name, token)
	if err != nil {
		return err
	}
	hold, err := lock.Acquire(ctx, owner, redlock.WithLease(holdLease))
	if err != nil {
		return fmt.Errorf("acquire %s: %w", name, err)
	}
	// Not released: another process releases it by the token.
	fmt.Printf("held %d\n", hold.FencingToken())
	return nil
}

func runRelease(ctx context.Context, client *redlock.Client, name, token string) error {
	lock, owner, err := lockAndOwner(client, name, token)
	if err != nil {
		return err
	}
	remaining, err := lock.Release(ctx, owner) // ErrNotHeld is an error too
	if err != nil {
		return fmt.Errorf("release %s: %w", name, err)
	}
	fmt.Printf("released %d\n", remaining)
	return nil
}

func runWait(ctx context.Context, client *redlock.Client, name, readyFile string) error {
	lock, err := client.Lock(name)
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	owner := redlock.NewOwner()
	ready, err := os.OpenFile(readyFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create ready file: %w", err)
	}
	if err := ready.Close(); err != nil {
		return fmt.Errorf("create ready file: %w", err)
	}
	hold, err := lock.Acquire(ctx, owner)
	acquiredMS := time.Now().UnixMilli()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", name, err)
	}
	fmt.Printf("acquired %d %d\n", hold.FencingToken(), acquiredMS)
	if err := hold.Release(ctx); err != nil {
		return fmt.Errorf("release %s: %w", name, err)
	}
	return nil
}

func lockAndOwner(client *redlock.Client, name, token string) (*redlock.Lock, *redlock.Owner, error) {
	lock, err := client.Lock(name)
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: %w", name, err)
	}
	owner, err := redlock.OwnerFromToken(token)
	if err != nil {
		return nil, nil, fmt.Errorf("owner token %q: %w", token, err)
	}
	return lock, owner, nil
}

// readCounter reads the integer in path; a missing or empty file is 0.
func readCounter(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read counter: %w", err)
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		return 0, nil
	}
	value, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter file %s holds %q, not an integer", path, text)
	}
	return value, nil
}

// writeCounter truncates path and writes value in place (no rename: the resource is meant to
// be non-atomic, so only the lock keeps updates from being lost).
func writeCounter(path string, value int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write counter: %w", err)
	}
	_, err = f.WriteString(strconv.FormatInt(value, 10))
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("write counter: %w", err)
	}
	return nil
}

func appendRecord(path string, value int64, fencing uint64, waitUS int64) error {
	return appendLine(path, fmt.Sprintf("%s %d %d %d %d\n", lang, os.Getpid(), value, fencing, waitUS))
}

// appendLine appends line with one write to path opened with O_APPEND, so that lines of
// several processes never interleave.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	n, err := f.Write([]byte(line))
	if err == nil && n != len(line) {
		err = fmt.Errorf("short write (%d of %d bytes)", n, len(line))
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}
