// Package chaos holds only a test: it kills each live experiment with
// SIGKILL at seeded points chosen from the run's own progress, starts a
// second run, and checks by a before/after difference that nothing of the
// first is left (temporary files, tracefs instances and uprobe_events,
// processes of its session, mounts, /sys/fs/bpf, BPF links) and that the
// second run's results are valid. It runs on Linux as root:
//
//	go test -v ./live/chaos                          # 2 points per experiment
//	MMLAB_CHAOS_POINTS=10 go test -v -timeout 60m ./live/chaos
//
// MMLAB_CHAOS_SEED replays a failure's seed. On a 2-CPU VM shared with
// other work the default took 2 min 16 s and the full test 10 min.
package chaos
