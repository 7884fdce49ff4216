package forkstall

// The probe sites: functions of the mmlab binary that nothing calls, so the
// probes cost the probed processes nothing but the registration itself.

//go:noinline
func probeSite0() { probeSink++ }

//go:noinline
func probeSite1() { probeSink += 2 }

//go:noinline
func probeSite2() { probeSink += 3 }

//go:noinline
func probeSite3() { probeSink += 4 }

var probeSink int

var probeSites = []func(){probeSite0, probeSite1, probeSite2, probeSite3}
