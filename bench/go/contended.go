package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	goredislib "github.com/redis/go-redis/v9"
)

// section is what a worker records for one critical section: wall-clock ns
// (time.Now().UnixNano(), one clock for every process of the machine).
type section struct {
	Asked   int64 `json:"a"` // before calling acquire
	Got     int64 `json:"g"` // acquire returned
	Release int64 `json:"r"` // before calling release
	Done    int64 `json:"d"` // release returned
	Worker  int   `json:"-"`
}

type workerResult struct {
	Rows   [][4]int64 `json:"rows"`
	GaveUp int64      `json:"gave_up"`
}

// runWorker is one contending process (the bench binary re-executed as
// `bench worker ...`). Protocol on stdin/stdout: it connects and warms up, prints "ready",
// waits for "go", runs its sections, prints one JSON line with its rows, and exits when stdin
// closes (so that closing its connections falls outside a MONITOR count).
func runWorker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	lib := fs.String("lib", "", "library")
	lockName := fs.String("lock", "", "lock name")
	sections := fs.Int("sections", 0, "sections to run")
	checkPath := fs.String("check", "", "O_APPEND file for the exclusion check")
	id := fs.Int("id", 0, "worker number")
	_ = fs.Parse(args)
	url := os.Getenv("REDIS_URL")
	l, err := libraryByName(*lib)
	if err != nil {
		return err
	}
	ctx := context.Background()
	lk, err := l.open(ctx, url, *lockName)
	if err != nil {
		return fmt.Errorf("%s: open: %w", *lib, err)
	}
	defer lk.close()
	check, err := os.OpenFile(*checkPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer check.Close()

	// Warm-up: connections made, scripts loaded.
	if err := lk.acquire(ctx); err != nil {
		return fmt.Errorf("%s: warm-up acquire: %w", *lib, err)
	}
	if err := lk.release(ctx); err != nil {
		return fmt.Errorf("%s: warm-up release: %w", *lib, err)
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if line, err := in.ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("worker %d: expected go, got %q (%v)", *id, line, err)
	}
	startGiveUps := lk.giveUps()
	rows := make([][4]int64, 0, *sections)
	enter := []byte(fmt.Sprintf("E %d\n", *id))
	leave := []byte(fmt.Sprintf("L %d\n", *id))
	for range *sections {
		asked := time.Now().UnixNano()
		if err := lk.acquire(ctx); err != nil {
			return fmt.Errorf("%s: acquire: %w", *lib, err)
		}
		got := time.Now().UnixNano()
		if _, err := check.Write(enter); err != nil {
			return err
		}
		if _, err := check.Write(leave); err != nil {
			return err
		}
		rel := time.Now().UnixNano()
		if err := lk.release(ctx); err != nil {
			return fmt.Errorf("%s: release: %w", *lib, err)
		}
		rows = append(rows, [4]int64{asked, got, rel, time.Now().UnixNano()})
	}
	out, err := json.Marshal(workerResult{Rows: rows, GaveUp: lk.giveUps() - startGiveUps})
	if err != nil {
		return err
	}
	os.Stdout.Write(append(out, '\n'))
	_, _ = io.Copy(io.Discard, in) // until the parent closes stdin
	return nil
}

type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func (w *worker) readLine() (string, error) {
	line, err := w.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("worker output: %w (line %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// contendedRun is one run of `procs` processes x `sections` sections of one lock.
type contendedRun struct {
	sections     []section // sorted by Got
	perSecond    float64
	pingP50      float64 // µs, when asked for
	steal        stealSpan
	gaveUp       int64
	monitorSent  int // commands sent by clients (MONITOR lines not marked "lua]")
	monitorByLua int
}

// contend runs one contended run of lib. With monitor, a MONITOR connection counts the
// commands Redis receives from the moment every worker is ready until all have reported.
// With pings > 0, that many go-redis PINGs are timed while the workers wait for GO.
func contend(ctx context.Context, admin *goredislib.Client, url string, lib library, procs, sections, pings int, monitor bool, tmp string) (_ *contendedRun, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	lockName := fmt.Sprintf("p4:%d", time.Now().UnixNano())
	checkPath := filepath.Join(tmp, lockName+".check")
	workers := make([]*worker, procs)
	defer func() {
		for _, w := range workers {
			if w != nil {
				if err != nil {
					// The others may wait long for a lock a failed worker held: stop them.
					_ = w.cmd.Process.Kill()
				}
				w.stdin.Close()
				_ = w.cmd.Wait()
			}
		}
	}()
	for i := range workers {
		cmd := exec.Command(exe, "worker", "-lib", lib.name, "-lock", lockName,
			"-sections", fmt.Sprint(sections), "-check", checkPath, "-id", fmt.Sprint(i))
		cmd.Env = append(os.Environ(), "REDIS_URL="+url)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		workers[i] = &worker{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
	}
	for i, w := range workers {
		if line, err := w.readLine(); err != nil || line != "ready" {
			return nil, fmt.Errorf("%s worker %d did not get ready: %q %v", lib.name, i, line, err)
		}
	}
	run := &contendedRun{}
	if pings > 0 {
		if run.pingP50, err = pingP50(ctx, admin, pings); err != nil {
			return nil, err
		}
	}
	var mon *monitorCount
	if monitor {
		if mon, err = startMonitor(url); err != nil {
			return nil, err
		}
		defer mon.conn.Close()
	}
	stealFrom := readSteal()
	for _, w := range workers {
		if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
			return nil, err
		}
	}
	for i, w := range workers {
		line, err := w.readLine()
		if err != nil {
			return nil, fmt.Errorf("%s worker %d: %w", lib.name, i, err)
		}
		var res workerResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return nil, fmt.Errorf("%s worker %d: %w", lib.name, i, err)
		}
		if len(res.Rows) != sections {
			return nil, fmt.Errorf("%s worker %d: %d sections, want %d", lib.name, i, len(res.Rows), sections)
		}
		run.gaveUp += res.GaveUp
		for _, r := range res.Rows {
			run.sections = append(run.sections, section{Asked: r[0], Got: r[1], Release: r[2], Done: r[3], Worker: i})
		}
	}
	run.steal = stealFrom.until(readSteal())
	if mon != nil {
		if run.monitorSent, run.monitorByLua, err = mon.stop(ctx, admin); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(run.sections, func(a, b section) int { return cmpInt64(a.Got, b.Got) })
	if err := checkExclusion(lib.name, run.sections, checkPath, procs*sections); err != nil {
		return nil, err
	}
	first, last := run.sections[0].Asked, run.sections[0].Done
	for _, s := range run.sections {
		first, last = min(first, s.Asked), max(last, s.Done)
	}
	run.perSecond = float64(len(run.sections)) / (float64(last-first) / 1e9)
	return run, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// errOverlap is the failure of the mutual exclusion check.
var errOverlap = errors.New("MUTUAL EXCLUSION VIOLATED: two holders at once")

// checkExclusion fails when two sections overlapped: by the recorded times (a section's hold
// [got, release start] must end before the next one's got) and by the O_APPEND file, where the
// kernel orders every worker's enter/leave lines and each enter must follow the previous leave.
func checkExclusion(lib string, byGot []section, checkPath string, total int) error {
	for i := 1; i < len(byGot); i++ {
		prev, next := byGot[i-1], byGot[i]
		if next.Got < prev.Release {
			return fmt.Errorf("%s: %w: worker %d got the lock at %d, %d ns before worker %d began releasing it",
				lib, errOverlap, next.Worker, next.Got, prev.Release-next.Got, prev.Worker)
		}
	}
	data, err := os.ReadFile(checkPath)
	if err != nil {
		return err
	}
	defer os.Remove(checkPath)
	holder, enters := "", 0
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		kind, who, _ := strings.Cut(line, " ")
		switch {
		case kind == "E" && holder == "":
			holder = who
			enters++
		case kind == "L" && holder == who:
			holder = ""
		default:
			return fmt.Errorf("%s: %w: check file line %d %q while worker %q holds it", lib, errOverlap, n+1, line, holder)
		}
	}
	if enters != total || holder != "" {
		return fmt.Errorf("%s: check file has %d sections (want %d), last holder %q", lib, enters, total, holder)
	}
	return nil
}

// monitorCount reads a MONITOR connection until the end marker.
type monitorCount struct {
	conn   net.Conn
	done   chan struct{}
	sent   int
	byLua  int
	err    error
	marker string
}

func startMonitor(url string) (*monitorCount, error) {
	opts, err := goredislib.ParseURL(url)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", opts.Addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 1<<20)
	command := func(args ...string) (string, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := io.WriteString(conn, b.String()); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}
	if opts.Password != "" {
		auth := []string{"AUTH", opts.Password}
		if opts.Username != "" {
			auth = []string{"AUTH", opts.Username, opts.Password}
		}
		if reply, err := command(auth...); err != nil || !strings.HasPrefix(reply, "+OK") {
			conn.Close()
			return nil, fmt.Errorf("monitor AUTH: %q %v", reply, err)
		}
	}
	if reply, err := command("MONITOR"); err != nil || !strings.HasPrefix(reply, "+OK") {
		conn.Close()
		return nil, fmt.Errorf("MONITOR: %q %v", reply, err)
	}
	m := &monitorCount{conn: conn, done: make(chan struct{}), marker: fmt.Sprintf("bench-go-monitor-end-%d", time.Now().UnixNano())}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				m.err = err
				return
			}
			switch {
			case strings.Contains(line, m.marker):
				return // the bench's own end marker: not counted
			case strings.Contains(line, "lua]"):
				m.byLua++
			default:
				m.sent++
			}
		}
	}()
	return m, nil
}

// stop sends the end marker (ECHO) and waits for the reader to reach it.
func (m *monitorCount) stop(ctx context.Context, admin *goredislib.Client) (sent, byLua int, err error) {
	if err := admin.Echo(ctx, m.marker).Err(); err != nil {
		return 0, 0, err
	}
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		return 0, 0, errors.New("MONITOR: end marker not seen within 60 s")
	}
	if m.err != nil {
		return 0, 0, fmt.Errorf("MONITOR: %w", m.err)
	}
	return m.sent, m.byLua, nil
}

// contendedStats are the figures of a library's timed contended runs.
type contendedStats struct {
	perSecond   []float64 // per run
	waitsMs     []float64 // every section's wait, runs pooled, in run order
	handoffsUs  []float64 // release start -> next got, when the next holder was already waiting
	handChanges []float64 // per run
	waitMaxMs   []float64 // per run
	steal       stealSpan // over the runs
	gaveUp      int64
}

func (c *contendedStats) add(run *contendedRun) {
	c.perSecond = append(c.perSecond, run.perSecond)
	c.gaveUp += run.gaveUp
	c.steal = c.steal.plus(run.steal)
	changes, waitMax := 0, 0.0
	for i, s := range run.sections {
		wait := float64(s.Got-s.Asked) / 1e6
		c.waitsMs = append(c.waitsMs, wait)
		waitMax = max(waitMax, wait)
		if i == 0 {
			continue
		}
		prev := run.sections[i-1]
		if s.Worker != prev.Worker {
			changes++
		}
		if s.Asked < prev.Release {
			c.handoffsUs = append(c.handoffsUs, float64(s.Got-prev.Release)/1e3)
		}
	}
	c.handChanges = append(c.handChanges, float64(changes))
	c.waitMaxMs = append(c.waitMaxMs, waitMax)
}
