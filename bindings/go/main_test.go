package redlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The tests run against a throwaway redis-server on a free loopback port, started here and
// killed at the end. REDLOCK_BENCH_URL points the benchmarks at another server instead (the
// bench script runs every language against one server).
var redisURL string
var redisAddr string

// bg is the context of calls whose wait the test does not limit.
var bg = context.Background()

func TestMain(m *testing.M) {
	if url := os.Getenv("REDLOCK_BENCH_URL"); url != "" {
		redisURL = url
		redisAddr = strings.TrimPrefix(url, "redis://")
		os.Exit(m.Run())
	}
	stop, err := startRedis()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start redis-server:", err)
		os.Exit(2)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startRedis() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "redlock-go-test-")
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := listener.Addr().(*net.TCPAddr).Port
	listener.Close()
	binary := os.Getenv("REDIS_SERVER_BIN")
	if binary == "" {
		binary = "redis-server"
	}
	cmd := exec.Command(binary, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	dieWithTests(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%v (install it with scripts/setup.sh)", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	redisAddr = fmt.Sprintf("127.0.0.1:%d", port)
	redisURL = "redis://" + redisAddr
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if reply, err := redisCommand("PING"); err == nil && reply == "+PONG" {
			return stop, nil
		}
	}
	stop()
	return nil, fmt.Errorf("redis-server did not answer on %s", redisAddr)
}

// redisCommand sends one command and returns the first line of the reply (enough for the
// integer and status replies the tests read).
func redisCommand(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", redisAddr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	request := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		request += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(request)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// lockKeyCount counts the keys lock name has in Redis (all of them carry "{name}", the hash tag;
// the per-slot fencing counters are shared and stay by design, so they are not counted).
func lockKeyCount(t *testing.T, name string) int {
	t.Helper()
	reply, err := redisCommand("EVAL", "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do "+
		"if string.find(k, '{' .. ARGV[1] .. '}', 1, true) then n = n + 1 end end return n", "0", name)
	if err != nil || !strings.HasPrefix(reply, ":") {
		t.Fatalf("counting keys: %q %v", reply, err)
	}
	var n int
	fmt.Sscan(reply[1:], &n)
	return n
}

func connect(t testing.TB, opts ...Option) *Client {
	t.Helper()
	client, err := Connect(context.Background(), redisURL, opts...)
	if err != nil {
		t.Fatalf("connect to %s: %v", redisURL, err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

var nameSerial atomic.Int64

// uniqueName is a lock name no other test uses.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("go-test:%s:%d:%d", t.Name(), os.Getpid(), nameSerial.Add(1))
}

func mustLock(t testing.TB, c *Client, name string) *Lock {
	t.Helper()
	lock, err := c.Lock(name)
	if err != nil {
		t.Fatalf("lock %q: %v", name, err)
	}
	return lock
}

func mustAcquire(t testing.TB, l *Lock, owner *Owner, opts ...AcquireOption) *Hold {
	t.Helper()
	hold, err := l.TryAcquire(context.Background(), owner, opts...)
	if err != nil {
		t.Fatalf("acquire %q: %v", l.Name(), err)
	}
	return hold
}

func wantErr(t testing.TB, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("want %v, got %v", kind, err)
	}
}

// eventually polls cond every 10ms until it holds or limit passes.
func eventually(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// mustOK fails the test on an error, so a check of a bool result can never pass on a failed
// call: mustOK(t)(lock.IsLocked(bg)).
func mustOK(t testing.TB) func(bool, error) bool {
	return func(v bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
