// Command bench compares redlock-go with github.com/go-redsync/redsync/v4 and
// github.com/bsm/redislock on ONE redis-server ($REDIS_URL), in one run:
//
//   - P3b, uncontended: one goroutine, acquire+release cycles of one lock (cycles/s and the
//     latency of one cycle);
//   - P4, contended: PROCS processes (this binary re-executed as workers) x SECTIONS sections of
//     one lock (sections/s, wait, handoff in PING round trips, how often the holder changes),
//     plus one untimed run per library under MONITOR for the Redis commands per section.
//
// Libraries are interleaved, the order rotating every repetition. Every library holds the lock
// with a fixed 10 s lease (no watchdog). Fragments (bench/FRAGMENTS.md) P3b-go.json and
// P4-go.json go to $BENCH_OUT; BENCH_QUICK=1 makes the runs short.
//
//	REDIS_URL=redis://127.0.0.1:6379 BENCH_OUT=/tmp/out bench [-reps 5] [-cycles 2000]
//	    [-p4-reps 3] [-sections 1000] [-procs 4] [-only p3b|p4]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	goredislib "github.com/redis/go-redis/v9"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := runWorker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if errors.Is(err, errOverlap) {
			fmt.Fprintln(os.Stderr, "bench: !!! a lock let two holders in at once !!!")
		}
		os.Exit(1)
	}
}

type config struct {
	url, out                  string
	quick                     bool
	reps, cycles              int
	p4Reps, sections, procs   int
	warmup, pings, maxSamples int
	monitorCycles             int
	runP3b, runP4             bool
}

func run() error {
	quick := os.Getenv("BENCH_QUICK") == "1"
	cfg := config{
		url: os.Getenv("REDIS_URL"), out: os.Getenv("BENCH_OUT"), quick: quick,
		reps: 5, cycles: 2000, p4Reps: 3, sections: 1000, procs: 4,
		warmup: 100, pings: 300, maxSamples: 2000, monitorCycles: 200,
	}
	if quick {
		cfg.cycles, cfg.sections = 300, 200
	}
	only := ""
	flag.IntVar(&cfg.reps, "reps", cfg.reps, "P3b repetitions (>= 3)")
	flag.IntVar(&cfg.cycles, "cycles", cfg.cycles, "P3b acquire+release cycles per repetition")
	flag.IntVar(&cfg.p4Reps, "p4-reps", cfg.p4Reps, "P4 repetitions (>= 3)")
	flag.IntVar(&cfg.sections, "sections", cfg.sections, "P4 sections per process")
	flag.IntVar(&cfg.procs, "procs", cfg.procs, "P4 processes")
	flag.StringVar(&only, "only", "", "run only p3b or p4")
	flag.Parse()
	cfg.runP3b, cfg.runP4 = only != "p4", only != "p3b"
	if cfg.url == "" {
		return errors.New("REDIS_URL is not set")
	}
	if cfg.out == "" {
		return errors.New("BENCH_OUT is not set")
	}
	if cfg.reps < 3 || cfg.p4Reps < 3 {
		return errors.New("at least 3 repetitions")
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	opts, err := goredislib.ParseURL(cfg.url)
	if err != nil {
		return err
	}
	admin := goredislib.NewClient(opts)
	defer admin.Close()
	if err := admin.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", cfg.url, err)
	}

	if cfg.runP3b {
		frag, err := uncontendedGoal(ctx, admin, cfg)
		if err != nil {
			return err
		}
		if err := writeFragment(cfg.out, "P3b-go.json", frag); err != nil {
			return err
		}
		printP3b(frag, cfg)
	}
	if cfg.runP4 {
		frag, ping, err := contendedGoal(ctx, admin, cfg)
		if err != nil {
			return err
		}
		if err := writeFragment(cfg.out, "P4-go.json", frag); err != nil {
			return err
		}
		printP4(frag, cfg, ping)
	}
	fmt.Printf("\nfragments in %s\n", cfg.out)
	return nil
}

// -- fragments (bench/FRAGMENTS.md) --------------------------------------------------------

type fragment struct {
	Goal     string   `json:"goal"`
	Title    string   `json:"title"`
	Target   string   `json:"target"`
	Headline headline `json:"headline"`
	Series   []series `json:"series"`
	Notes    string   `json:"notes"`
}

type headline struct {
	Label string  `json:"label"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}

type series struct {
	Library   string             `json:"library"`
	Metric    string             `json:"metric"`
	Better    string             `json:"better"`
	Runs      []float64          `json:"runs"`
	Median    float64            `json:"median"`
	Min       float64            `json:"min"`
	Max       float64            `json:"max"`
	LatencyUs latency            `json:"latency_us"`
	Extra     map[string]float64 `json:"extra,omitempty"`
}

type latency struct {
	P50     float64   `json:"p50"`
	P99     float64   `json:"p99"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples,omitempty"`
}

func newSeries(lib, metric string, runs, latUs []float64, maxSamples int) series {
	return series{
		Library: lib, Metric: metric, Better: "higher",
		Runs:   roundAll(runs, 1),
		Median: round(median(runs), 1), Min: round(slices.Min(runs), 1), Max: round(slices.Max(runs), 1),
		LatencyUs: latency{
			P50: round(percentile(latUs, 50), 1), P99: round(percentile(latUs, 99), 1),
			Max: round(slices.Max(latUs), 1), Samples: roundAll(spread(latUs, maxSamples), 1),
		},
	}
}

func writeFragment(dir, name string, f *fragment) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644)
}

func libNames() []string {
	names := make([]string, len(libraries))
	for i, l := range libraries {
		names[i] = l.name
	}
	return names
}

// -- P3b: uncontended ----------------------------------------------------------------------

// uncontendedSlices is how many stretches each library's cycles of one repetition are cut into,
// the libraries taking turns (order rotating every slice): on a virtual machine whose idle vCPUs
// are slow to wake, a round trip's cost drifts over seconds, and one stretch per library and
// repetition measured the drift as much as the library (docs/benchmarks.md).
const uncontendedSlices = 10

func uncontendedGoal(ctx context.Context, admin *goredislib.Client, cfg config) (*fragment, error) {
	lockers := make(map[string]locker)
	defer func() {
		for _, l := range lockers {
			l.close()
		}
	}()
	for _, lib := range libraries {
		l, err := lib.open(ctx, cfg.url, fmt.Sprintf("p3b:%d", time.Now().UnixNano()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.name, err)
		}
		lockers[lib.name] = l
	}
	runs := make(map[string][]float64)
	lat := make(map[string][]float64) // µs, every cycle of every repetition
	perSlice := (cfg.cycles + uncontendedSlices - 1) / uncontendedSlices
	for rep := range cfg.reps {
		for _, lib := range rotated(libraries, rep) {
			for range cfg.warmup {
				if err := cycle(ctx, lockers[lib.name]); err != nil {
					return nil, fmt.Errorf("%s: %w", lib.name, err)
				}
			}
		}
		elapsed := make(map[string]time.Duration)
		for slice := range uncontendedSlices {
			for _, lib := range rotated(libraries, rep*uncontendedSlices+slice) {
				l := lockers[lib.name]
				start := time.Now()
				for range perSlice {
					t0 := time.Now()
					if err := cycle(ctx, l); err != nil {
						return nil, fmt.Errorf("%s: %w", lib.name, err)
					}
					lat[lib.name] = append(lat[lib.name], float64(time.Since(t0).Nanoseconds())/1e3)
				}
				elapsed[lib.name] += time.Since(start)
			}
		}
		for _, lib := range libraries {
			rate := float64(perSlice*uncontendedSlices) / elapsed[lib.name].Seconds()
			runs[lib.name] = append(runs[lib.name], rate)
			fmt.Fprintf(os.Stderr, "P3b rep %d/%d %-10s %8.0f cycles/s\n", rep+1, cfg.reps, lib.name, rate)
		}
	}
	// Untimed: the Redis commands of one cycle, from MONITOR.
	cmds := make(map[string][2]float64)
	for _, lib := range libraries {
		mon, err := startMonitor(cfg.url)
		if err != nil {
			return nil, err
		}
		for range cfg.monitorCycles {
			if err := cycle(ctx, lockers[lib.name]); err != nil {
				mon.conn.Close()
				return nil, fmt.Errorf("%s: %w", lib.name, err)
			}
		}
		sent, byLua, err := mon.stop(ctx, admin)
		mon.conn.Close()
		if err != nil {
			return nil, err
		}
		n := float64(cfg.monitorCycles)
		cmds[lib.name] = [2]float64{float64(sent) / n, float64(byLua) / n}
	}
	f := &fragment{
		Goal:   "P3b",
		Title:  "Go: uncontended acquire+release",
		Target: ">= 1.2x the faster peer",
		Notes: fmt.Sprintf("one goroutine, acquire+release of one lock, %d reps x %d cycles (after %d warm-up cycles), "+
			"each rep interleaved in %d slices per library, the order rotating each slice; fixed %s lease, no watchdog; "+
			"redlock-go Acquire(ctx, owner, WithLease); redsync v4 single go-redis v9 pool, NewMutex(WithExpiry) Lock/Unlock; "+
			"redislock Obtain(ttl)/Release on go-redis v9; one redis-server on 127.0.0.1; "+
			"redis_cmds_per_cycle from %d more untimed cycles under MONITOR",
			cfg.reps, cfg.cycles, cfg.warmup, uncontendedSlices, lease, cfg.monitorCycles),
	}
	for _, name := range libNames() {
		s := newSeries(name, "cycles/s", runs[name], lat[name], cfg.maxSamples)
		s.Extra = map[string]float64{
			"redis_cmds_per_cycle":  round(cmds[name][0], 3),
			"script_cmds_per_cycle": round(cmds[name][1], 3),
		}
		f.Series = append(f.Series, s)
	}
	peer := max(median(runs["redsync"]), median(runs["redislock"]))
	ratio := median(runs["redlock-go"]) / peer
	f.Headline = headline{Label: "redlock-go / faster peer", Value: round(ratio, 3), Met: ratio >= 1.2}
	return f, nil
}

func cycle(ctx context.Context, l locker) error {
	if err := l.acquire(ctx); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := l.release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// -- P4: contended -------------------------------------------------------------------------

// pingP50 is the p50 of n go-redis PING round trips, in µs.
func pingP50(ctx context.Context, admin *goredislib.Client, n int) (float64, error) {
	rtts := make([]float64, 0, n)
	for range n {
		t0 := time.Now()
		if err := admin.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		rtts = append(rtts, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	return percentile(rtts, 50), nil
}

func contendedGoal(ctx context.Context, admin *goredislib.Client, cfg config) (*fragment, float64, error) {
	tmp, err := os.MkdirTemp("", "redlock-bench-go-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(tmp)
	// The divisor: PINGs while each timed run's workers wait for GO (as the Rust and Java
	// benches take theirs), the median of the runs' p50s. This machine's round trip can move by
	// a factor of four within minutes; one series taken once would stand for one moment.
	var pings []float64
	stats := make(map[string]*contendedStats)
	for _, name := range libNames() {
		stats[name] = &contendedStats{}
	}
	for rep := range cfg.p4Reps {
		for _, lib := range rotated(libraries, rep) {
			run, err := contend(ctx, admin, cfg.url, lib, cfg.procs, cfg.sections, cfg.pings, false, tmp)
			if err != nil {
				return nil, 0, err
			}
			stats[lib.name].add(run)
			pings = append(pings, run.pingP50)
			fmt.Fprintf(os.Stderr, "P4 rep %d/%d %-10s %8.0f sections/s, PING p50 %.1f us\n", rep+1, cfg.p4Reps, lib.name, run.perSecond, run.pingP50)
		}
	}
	ping := median(pings)
	// Untimed: MONITOR slows Redis down.
	monitored := make(map[string]*contendedRun)
	for _, lib := range libraries {
		run, err := contend(ctx, admin, cfg.url, lib, cfg.procs, cfg.sections, 0, true, tmp)
		if err != nil {
			return nil, 0, err
		}
		monitored[lib.name] = run
		fmt.Fprintf(os.Stderr, "P4 MONITOR run %-10s %d commands sent, %d run by scripts\n", lib.name, run.monitorSent, run.monitorByLua)
	}

	total := float64(cfg.procs * cfg.sections)
	f := &fragment{
		Goal:   "P4",
		Title:  "Go: contended handoff",
		Target: "handoff p50 <= 2 RTT, wait max <= 10 ms, <= 4 Redis commands per section",
		Notes: fmt.Sprintf("%d processes x %d sections of one lock per run, %d reps, libraries interleaved (order rotating); "+
			"fixed %s lease; wait = acquire call to return; handoff = release start to the next acquire return when the next holder "+
			"was already waiting, / go-redis PING p50 (%.1f us: median of the timed runs' p50s of %d pings each, taken while the workers wait for GO); hand_changes = median per run; "+
			"round trips from one more untimed run under MONITOR (lines not marked lua]); "+
			"steal_pct = the host's steal (/proc/stat) over the timed runs, %% of all CPUs; wait_max_ms_rep_median = median of each run's max; "+
			"redlock-go waits in the core (Acquire without deadline); redsync: its default retry (32 tries, random 50-250 ms delay, "+
			"called again if it gives up); redislock: RetryStrategy LinearBackoff(%s) (its README's retry example), called again at its ttl deadline; "+
			"exclusion checked (recorded times + O_APPEND file)",
			cfg.procs, cfg.sections, cfg.p4Reps, lease, ping, cfg.pings, redislockBackoff),
	}
	for _, name := range libNames() {
		st, mon := stats[name], monitored[name]
		waitsUs := make([]float64, len(st.waitsMs))
		for i, w := range st.waitsMs {
			waitsUs[i] = w * 1e3
		}
		s := newSeries(name, "sections/s", st.perSecond, waitsUs, cfg.maxSamples)
		s.Extra = map[string]float64{
			"wait_p50_ms":             round(percentile(st.waitsMs, 50), 3),
			"wait_p99_ms":             round(percentile(st.waitsMs, 99), 3),
			"wait_max_ms":             round(slices.Max(st.waitsMs), 3),
			"hand_changes":            median(st.handChanges),
			"redis_cmds_per_section":  round(float64(mon.monitorSent)/total, 3),
			"script_cmds_per_section": round(float64(mon.monitorByLua)/total, 3),
			"ping_rtt_p50_us":         round(ping, 1),
			"handoffs_counted":        float64(len(st.handoffsUs)),
			"retry_give_ups":          float64(st.gaveUp),
			"wait_max_ms_rep_median":  round(median(st.waitMaxMs), 3),
		}
		if steal, ok := st.steal.percent(); ok {
			s.Extra["steal_pct"] = round(steal, 1)
		}
		if len(st.handoffsUs) > 0 {
			h := percentile(st.handoffsUs, 50)
			s.Extra["handoff_p50_us"] = round(h, 1)
			s.Extra["handoff_p50_rtt"] = round(h/ping, 2)
		}
		f.Series = append(f.Series, s)
	}
	ours := f.Series[0].Extra
	h, ok := ours["handoff_p50_rtt"]
	if !ok {
		return nil, 0, errors.New("redlock-go: no handoff to a waiting holder was seen")
	}
	f.Headline = headline{
		Label: "redlock-go handoff p50 / PING RTT p50",
		Value: h,
		Met:   h <= 2 && ours["wait_max_ms"] <= 10 && ours["redis_cmds_per_section"] <= 4,
	}
	return f, ping, nil
}

// -- the table on stdout -------------------------------------------------------------------

func printP3b(f *fragment, cfg config) {
	fmt.Printf("\nP3b uncontended: %d reps x %d acquire+release cycles, one goroutine, %s lease\n", cfg.reps, cfg.cycles, lease)
	fmt.Printf("%-11s %10s %10s %10s %9s %9s %9s %9s\n", "library", "median/s", "min/s", "max/s", "p50 us", "p99 us", "max us", "cmds/cyc")
	for _, s := range f.Series {
		fmt.Printf("%-11s %10.0f %10.0f %10.0f %9.1f %9.1f %9.0f %9.2f\n", s.Library, s.Median, s.Min, s.Max,
			s.LatencyUs.P50, s.LatencyUs.P99, s.LatencyUs.Max, s.Extra["redis_cmds_per_cycle"])
	}
	fmt.Printf("headline: %s = %.2f (target %s: %s)\n", f.Headline.Label, f.Headline.Value, f.Target, metWord(f.Headline.Met))
}

func printP4(f *fragment, cfg config, ping float64) {
	fmt.Printf("\nP4 contended: %d processes x %d sections, %d reps, %s lease; PING p50 %.1f us\n",
		cfg.procs, cfg.sections, cfg.p4Reps, lease, ping)
	fmt.Printf("%-11s %10s %9s %9s %9s %9s %9s %9s %8s %9s %7s\n", "library", "median/s", "wait p50", "p99 ms", "max ms",
		"steal %", "handoff", "/RTT", "changes", "cmds/sec", "giveups")
	for _, s := range f.Series {
		e := s.Extra
		handoff, rtt := "-", "-"
		if v, ok := e["handoff_p50_us"]; ok {
			handoff, rtt = fmt.Sprintf("%.0fus", v), fmt.Sprintf("%.2f", e["handoff_p50_rtt"])
		}
		steal := "-"
		if v, ok := e["steal_pct"]; ok {
			steal = fmt.Sprintf("%.1f", v)
		}
		fmt.Printf("%-11s %10.0f %9.3f %9.2f %9.1f %9s %9s %9s %8.0f %9.2f %7.0f\n", s.Library, s.Median,
			e["wait_p50_ms"], e["wait_p99_ms"], e["wait_max_ms"], steal, handoff, rtt, e["hand_changes"],
			e["redis_cmds_per_section"], e["retry_give_ups"])
	}
	fmt.Printf("headline: %s = %.2f, wait max %.1f ms, %.2f commands/section (target %s: %s)\n",
		f.Headline.Label, f.Headline.Value, f.Series[0].Extra["wait_max_ms"], f.Series[0].Extra["redis_cmds_per_section"],
		f.Target, metWord(f.Headline.Met))
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}
