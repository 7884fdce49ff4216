package report

import "math/rand/v2"

// samplePage is a page as `mmlab all` fills it: three seeds, each kind of
// chart, several series (one more than the three the seeds have), a
// comparison of two hosts.
func samplePage() *Page {
	rng := rand.New(rand.NewPCG(1, 2))
	runs := func(center, spread float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = center * (1 + spread*(rng.Float64()-0.5))
		}
		return out
	}
	dots := func(cats int, perCat [][]float64) []Point {
		var ps []Point
		for c := range cats {
			for _, y := range perCat[c] {
				ps = append(ps, Point{X: float64(c), Y: y})
			}
		}
		return ps
	}
	forkCats := []string{"busy-maps multi-1", "busy-forks multi-1", "idle-1000 multi-1"}
	fork := Chart{
		Title: "Longest fork() during a uprobe attach, per run", Kind: Dots,
		XLabel: "case and mode", YLabel: "longest fork() (ms)", LogY: true, Categories: forkCats,
		Series: []Series{
			{Name: "model before", Points: dots(3, [][]float64{runs(400, 0.3, 5), runs(380, 0.3, 5), runs(12, 0.4, 5)})},
			{Name: "model after", Points: dots(3, [][]float64{runs(4.2, 0.3, 5), runs(4.0, 0.3, 5), runs(3.1, 0.4, 5)})},
			{Name: "live kernel", Points: dots(3, [][]float64{runs(174, 0.4, 5), runs(150, 0.4, 5), runs(9, 0.4, 5)})},
		},
		Refs:    []Ref{{Label: "quiet baseline", Y: 1.3}},
		Command: "mmlab run forkstall --runs 5 --size 1G --cases busy-maps,busy-forks,idle-1000 --modes multi-1",
	}
	var fullCats []string
	for _, c := range []string{"busy-maps", "busy-forks", "idle-1000", "idle-5000"} {
		for _, m := range []string{"multi-1", "multi-4", "perf-4"} {
			fullCats = append(fullCats, c+" "+m)
		}
	}
	detach := Chart{
		Title: "Longest fork() during a uprobe detach, per run, every case and mode", Kind: Dots,
		XLabel: "case and mode", YLabel: "longest fork() (ms)", Categories: fullCats,
		Refs:    []Ref{{Label: "quiet baseline", Y: 1.3}},
		Command: "mmlab run forkstall --full --target live",
	}
	for _, name := range []string{"model before", "model after", "live kernel"} {
		var per [][]float64
		for i := range fullCats {
			center := 2500.0
			if name == "model after" || i >= 6 {
				center = 30
			}
			per = append(per, runs(center, 0.5, 3))
		}
		detach.Series = append(detach.Series, Series{Name: name, Points: dots(len(fullCats), per)})
	}
	mapCats := []string{"no scanners", "4 scanners"}
	mapper := func(title, ylabel string, k float64) Chart {
		return Chart{
			Title: title, Kind: Bars, XLabel: "maps readers", YLabel: ylabel, Categories: mapCats,
			Series: []Series{
				{Name: "model before", Points: []Point{{0, 11 * k}, {1, 95 * k}}},
				{Name: "model after", Points: []Point{{0, 10 * k}, {1, 13 * k}}},
				{Name: "live kernel", Points: []Point{{0, 14 * k}, {1, 18 * k}}},
			},
			Command: "mmlab run mapscan --size 128M --duration 2s --samples 5",
		}
	}
	cpus := []float64{1, 2}
	hits := func(base, scale float64) []Point {
		return []Point{{cpus[0], base}, {cpus[1], base * scale}}
	}
	trig := Chart{
		Title: "uprobe hits per second against CPUs", Kind: Lines,
		XLabel: "CPUs", YLabel: "hits per second (M/s)",
		Series: []Series{
			{Name: "model srcu", Points: hits(3.1, 1.21)},
			{Name: "model tasks-trace", Points: hits(3.3, 1.26)},
			{Name: "model tasks-trace, optimized", Points: hits(6.8, 1.9)},
			{Name: "live kernel", Points: hits(2.4, 1.95)},
		},
		Command: "mmlab run trigger --cpus 1,2 --duration 2s",
	}
	ratios := Chart{
		Title: "2-CPU over 1-CPU hit rate: the seed's and ours", Kind: Bars,
		XLabel: "flavour", YLabel: "2-CPU / 1-CPU (ratio)", Categories: []string{"srcu", "tasks-trace"},
		Series: []Series{
			{Name: "seed (32 CPUs, bare metal)", Points: []Point{{0, 1.26}, {1, 1.26}}},
			{Name: "model", Points: []Point{{0, 1.21}, {1, 1.26}}},
			{Name: "live kernel", Points: []Point{{1, 1.95}}},
		},
		Refs:    []Ref{{Label: "no scaling", Y: 1}},
		Command: "mmlab run trigger --cpus 1,2 --duration 2s",
	}
	host := Machine{Kernel: "linux 6.18.0", CPUs: 2, MemBytes: 8 << 30, Go: "go1.26.8"}
	return &Page{
		Title:     "mmlab report",
		Generated: "2026-12-01T10:00:00Z",
		Command:   "mmlab all --quick",
		Hosts: []Host{
			{Name: "ci-vm", Machine: host, Setting: "HZ=250, preempt voluntary, 2 CPUs"},
			{Name: "node-7 <b>", Machine: Machine{Kernel: "linux 6.12.3", CPUs: 32, MemBytes: 128 << 30, Go: "go1.26.8"}, Setting: "HZ=1000, preempt full, 32 CPUs"},
		},
		Seeds: []Seed{
			{
				ID: "000", Title: "uprobes: Don't stall fork() when mmap_lock is busy",
				Summary: "uprobe register and unregister no longer hold dup_mmap_sem while they wait for a busy mmap_lock.",
				Source:  "the cover letter, bpf-next, 22 Oct 2026 (32 CPUs, HZ=1000, 4 GiB busy region)",
				Verdict: "seed 000: this kernel stalls fork() 174 ms during a uprobe attach (1.3 ms quiet): it lacks the fix; the model reproduces 400 → 4.2 ms",
				Parts: []Part{{
					Experiment: "forkstall", Title: "Fork stall during uprobe attach",
					Tables: []Table{{
						Title:   "longest fork() during attach, median of 5 runs (ms)",
						Columns: []string{"case", "mode", "seed (32 CPUs, 4 GiB)", "model before", "model after", "live 6.18 (2 CPUs, 1 GiB)"},
						Rows: [][]string{
							{"busy-maps", "multi-1", "400", "398.2", "4.2", "174.0"},
							{"busy-forks", "multi-1", "380", "371.9", "4.0", "150.3"},
							{"idle-1000", "multi-1", "12", "11.8", "3.1", "9.2"},
						},
					}},
					Text:   "forkstall, live (median of 5 runs; ms)\ncase        mode     attach  detach\nbusy-maps   multi-1   174.0   161.2\n",
					Charts: []Chart{fork, detach},
					Notes:  []string{"idle-5000 runs only with --full, after a memory check."},
				}},
			},
			{
				ID: "003", Title: "use per-vma locks for /proc/pid/maps reads and PROCMAP_QUERY",
				Summary: "Reading /proc/PID/maps and PROCMAP_QUERY take per-VMA locks instead of mmap_lock.",
				Source:  "Suren Baghdasaryan, v4, 4 Jun 2025; in v6.17",
				Verdict: "seed 003: this kernel answers PROCMAP_QUERY while another thread holds mmap_lock for write: it has the change",
				Parts: []Part{{
					Experiment: "mapscan", Title: "Mapper latency with and without maps scanners",
					Tables: []Table{{
						Columns: []string{"readers", "seed max (µs)", "model before max (µs)", "model after max (µs)", "live max (µs)"},
						Rows:    [][]string{{"none", "110", "110", "100", "140"}, {"4 scanners", "950", "950", "130", "180"}},
					}},
					Charts: []Chart{mapper("Mapper max latency", "max latency (µs)", 10), mapper("Mapper mean latency", "mean latency (µs)", 1)},
				}},
			},
			{
				ID: "004", Title: "uprobes: switch to RCU Tasks Trace flavor for better performance",
				Summary: "The uprobe hit path reads under RCU Tasks Trace instead of SRCU.",
				Source:  "Andrii Nakryiko, v4 8/8, Aug 2024; in v6.13",
				Verdict: "seed 004: hits scale 1.95x from 1 to 2 CPUs here (the seed: 1.26x); detach 12 ms; the release implies tasks-trace (a hint)",
				Parts: []Part{{
					Experiment: "trigger", Title: "Hits per second against CPUs",
					Tables: []Table{{
						Columns: []string{"variant", "1 CPU (M/s)", "2 CPUs (M/s)", "2/1"},
						Rows:    [][]string{{"model srcu", "3.10", "3.75", "1.21x"}, {"model tasks-trace", "3.30", "4.16", "1.26x"}, {"live kernel", "2.40", "4.68", "1.95x"}},
					}},
					Charts: []Chart{trig, ratios},
				}},
			},
		},
		Comparison: &Table{
			Columns: []string{"host", "kernel", "CPUs", "seed 000", "seed 003", "seed 004"},
			Rows: [][]string{
				{"ci-vm", "6.18.0", "2", "stalls 174 ms", "has the change", "1.95x"},
				{"node-7 <b>", "6.12.3", "32", "stalls 410 ms", "lacks the change", "1.31x"},
			},
		},
		Notes: []string{"the live part of maptear was skipped: not root"},
	}
}
