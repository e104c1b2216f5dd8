package main

import (
	"math"
	"slices"
	"time"
)

// median returns the middle value (the mean of the two middle values for an
// even count); NaN for no values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the p-th percentile (0-100) by nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// ms converts nanoseconds to milliseconds.
func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }

// perSecond returns n per elapsed nanoseconds, as a rate per second.
func perSecond(n int, elapsedNs int64) float64 {
	if elapsedNs <= 0 {
		return math.NaN()
	}
	return float64(n) / (float64(elapsedNs) / float64(time.Second))
}
