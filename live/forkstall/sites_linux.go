package forkstall

// The probe sites: functions of the mmlab binary that nothing calls, so the
// probes cost the probed processes nothing but the registration itself.

//go:noinline
func probeSite0() {}

//go:noinline
func probeSite1() {}

//go:noinline
func probeSite2() {}

//go:noinline
func probeSite3() {}

var probeSites = []func(){probeSite0, probeSite1, probeSite2, probeSite3}
