package main

import (
	"math"
	"slices"
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
