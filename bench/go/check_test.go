package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The exclusion check must fail on overlapping holds, by the times and by the check file.
func TestCheckExclusion(t *testing.T) {
	write := func(content string) string {
		path := filepath.Join(t.TempDir(), "check")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ok := []section{{Asked: 0, Got: 10, Release: 20, Done: 30, Worker: 0}, {Asked: 5, Got: 25, Release: 40, Done: 50, Worker: 1}}
	if err := checkExclusion("t", ok, write("E 0\nL 0\nE 1\nL 1\n"), 2); err != nil {
		t.Fatalf("sequential holds: %v", err)
	}
	overlap := []section{{Asked: 0, Got: 10, Release: 20, Worker: 0}, {Asked: 5, Got: 15, Release: 40, Worker: 1}}
	if err := checkExclusion("t", overlap, write("E 0\nL 0\nE 1\nL 1\n"), 2); !errors.Is(err, errOverlap) {
		t.Fatalf("overlapping times: %v", err)
	}
	if err := checkExclusion("t", ok, write("E 0\nE 1\nL 0\nL 1\n"), 2); !errors.Is(err, errOverlap) {
		t.Fatalf("overlapping check file: %v", err)
	}
	if err := checkExclusion("t", ok, write("E 0\nL 0\n"), 2); err == nil {
		t.Fatal("missing sections passed")
	}
}

func TestStats(t *testing.T) {
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Fatalf("median %v", m)
	}
	if p := percentile([]float64{1, 2, 3, 4, 5}, 50); p != 3 {
		t.Fatalf("p50 %v", p)
	}
	if got := rotated([]int{1, 2, 3}, 4); got[0] != 2 || got[2] != 1 {
		t.Fatalf("rotated %v", got)
	}
	if got := spread([]float64{0, 1, 2, 3, 4, 5}, 3); len(got) != 3 || got[1] != 2 {
		t.Fatalf("spread %v", got)
	}
}

// Steal over runs: ticks are 1/100 s of one CPU, summed over runs, shared by all CPUs.
func TestStealPercent(t *testing.T) {
	at := time.Unix(100, 0)
	first := stealSample{ticks: 1000, at: at, ok: true}.until(stealSample{ticks: 1020, at: at.Add(time.Second), ok: true})
	second := stealSample{ticks: 50, at: at, ok: true}.until(stealSample{ticks: 50, at: at.Add(time.Second), ok: true})
	got, ok := stealSpan{}.plus(first).plus(second).percent()
	want := 100 * 0.2 / (2 * float64(runtime.NumCPU()))
	if !ok || math.Abs(got-want) > 1e-9 {
		t.Fatalf("percent = %v, %v; want %v", got, ok, want)
	}
	if _, ok := first.plus(stealSample{}.until(stealSample{})).percent(); ok {
		t.Fatal("a run without readings must leave the sum without a figure")
	}
	if readSteal().ok != (runtime.GOOS == "linux") {
		t.Fatal("/proc/stat's steal column must be read on Linux")
	}
}
