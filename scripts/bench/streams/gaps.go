package main

import (
	"math"
	"math/rand/v2"
)

// gap is a mode's delay a line over the relay floor's in one run of the bench (issue 31's
// measure): the difference of the two modes' p50s, and how far it moves with the runs it was
// drawn from. The modes take turns a run each, so run i of one and run i of the other are a
// pair measured a few seconds apart; the interval resamples those pairs.
type gap struct {
	P50Ms float64 `json:"p50_ms"`
	// Low and High bound the middle 95 % of the difference over 2,000 resamplings of the runs
	// (a percentile bootstrap): the resolution of this run's figure, on this machine.
	LowMs  float64 `json:"p50_ci95_low_ms"`
	HighMs float64 `json:"p50_ci95_high_ms"`
	Pairs  int     `json:"pairs"`
}

// gapOver is mode's gap over floor, from their runs paired by index (a mode whose run failed
// stopped there, so the pairs before it are still a round each).
func gapOver(mode, floor []run) (gap, bool) {
	n := min(len(mode), len(floor))
	if n == 0 {
		return gap{}, false
	}
	diff := func(idx []int) float64 {
		var a, b []float64
		for _, i := range idx {
			a = appendDelays(a, mode[i])
			b = appendDelays(b, floor[i])
		}
		return math.Round((percentile(a, 50)-percentile(b, 50))*1000) / 1000 // to the µs, as the p50s
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	g := gap{P50Ms: diff(all), Pairs: n}
	const resamples = 2000
	rng := rand.New(rand.NewPCG(31, 31)) // fixed: the same runs give the same interval
	ds := make([]float64, resamples)
	idx := make([]int, n)
	for k := range ds {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		ds[k] = diff(idx)
	}
	g.LowMs, g.HighMs = percentile(ds, 2.5), percentile(ds, 97.5)
	return g, true
}

func appendDelays(xs []float64, r run) []float64 {
	for _, l := range r.lines {
		xs = append(xs, ms(l.at.Sub(l.printed)))
	}
	return xs
}
