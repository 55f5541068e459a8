package main

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile p (0..100) of values (as bench/python/bench.py).
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	i := int(math.Round(p / 100 * float64(len(sorted)-1)))
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// spread picks at most n values evenly spaced over values (kept in their order).
func spread(values []float64, n int) []float64 {
	if len(values) <= n {
		return slices.Clone(values)
	}
	out := make([]float64, n)
	for i := range n {
		out[i] = values[i*len(values)/n]
	}
	return out
}

// round to the given number of decimals.
func round(v float64, decimals int) float64 {
	f := math.Pow(10, float64(decimals))
	return math.Round(v*f) / f
}

func roundAll(values []float64, decimals int) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = round(v, decimals)
	}
	return out
}

// rotated is the library order of repetition rep: A B C, B C A, C A B, ...
func rotated[T any](items []T, rep int) []T {
	k := rep % len(items)
	return append(slices.Clone(items[k:]), items[:k]...)
}

// stealSample is the host's steal counter (/proc/stat, all CPUs, in USER_HZ ticks) at a moment.
// The hypervisor of a small VM stops vCPUs for milliseconds at a time; the contended waits of
// 10 ms and more coincide with such stops (docs/benchmarks.md), so each run says how much of
// its time was taken away.
type stealSample struct {
	ticks int64
	at    time.Time
	ok    bool
}

// stealSpan is the steal between samples: stolen CPU time over wall time. The zero value is
// the empty sum; failed marks a sum with a run whose counter could not be read.
type stealSpan struct {
	stolen, elapsed time.Duration
	failed          bool
}

// userHz is USER_HZ, the unit of /proc/stat (100 on every Linux architecture Go runs on).
const userHz = 100

func readSteal() stealSample {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return stealSample{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return stealSample{}
	}
	ticks, err := strconv.ParseInt(fields[8], 10, 64)
	return stealSample{ticks: ticks, at: time.Now(), ok: err == nil}
}

func (from stealSample) until(to stealSample) stealSpan {
	if !from.ok || !to.ok || to.ticks < from.ticks {
		return stealSpan{failed: true}
	}
	return stealSpan{
		stolen:  time.Duration(to.ticks-from.ticks) * time.Second / userHz,
		elapsed: to.at.Sub(from.at),
	}
}

func (s stealSpan) plus(o stealSpan) stealSpan {
	return stealSpan{stolen: s.stolen + o.stolen, elapsed: s.elapsed + o.elapsed, failed: s.failed || o.failed}
}

// percent of all CPUs' time that was stolen.
func (s stealSpan) percent() (float64, bool) {
	if s.failed || s.elapsed <= 0 {
		return 0, false
	}
	return 100 * s.stolen.Seconds() / (s.elapsed.Seconds() * float64(runtime.NumCPU())), true
}
