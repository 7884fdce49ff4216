package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/experiment/explorer"
	"mmlab/explore"
	"mmlab/report"
)

func explore1(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return exploreCtx(t.Context(), args...)
}

func exploreCtx(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := exploreMain(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// An interrupt (a cancelled context) ends the search with 130 and says how
// far it got; nothing is written.
func TestExploreInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	out := filepath.Join(t.TempDir(), "x.replay")
	code, stdout, stderr := exploreCtx(ctx, "reg-vs-fork", "--schedules", "1000", "--out", out)
	if code != 130 || !strings.Contains(stderr, "interrupted after 0 of 1000 schedules") || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 130 and the schedules run", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written after an interrupt", out)
	}
}

// Exit statuses: 2 for bad usage, naming the flag and value; 0 for --list,
// one scenario a line, name first.
func TestExploreUsage(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{nil, "no scenario"},
		{[]string{"nosuch"}, `unknown scenario "nosuch"`},
		{[]string{"reg-vs-fork", "--design", "middle"}, `--design "middle"`},
		{[]string{"reg-vs-fork", "--design", "fix"}, `--design "fix": reg-vs-fork runs in before or after`},
		{[]string{"reg-vs-fork", "--strategy", "dfs"}, `--strategy "dfs"`},
		{[]string{"reg-vs-fork", "--schedules", "0"}, "--schedules 0"},
		{[]string{"reg-vs-fork", "--bogus"}, "bogus"},
		{[]string{"reg-vs-fork", "extra"}, `unexpected argument "extra"`},
		{[]string{"--replay", "/nonexistent/x.replay"}, "no such file"},
	} {
		code, _, stderr := explore1(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.stderr)
		}
	}
	code, out, _ := explore1(t, "--list")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != len(explore.Scenarios) {
		t.Fatalf("--list: exit %d, %d lines for %d scenarios", code, len(lines), len(explore.Scenarios))
	}
	for i, sc := range explore.Scenarios {
		if !strings.HasPrefix(lines[i], sc.Name+" ") || !strings.Contains(lines[i], "seed "+sc.Seed) {
			t.Errorf("--list line %q, want %s first and its seed", lines[i], sc.Name)
		}
	}
}

// A failure exits 1, prints the shrunk interleaving and the pinning Go
// test, and writes a replay file that --replay runs again to the same
// failure; the same seed prints the same output.
func TestExploreFailureReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.replay")
	args := []string{"reg-vs-fork", "--design", "before", "--seed", "3", "--out", path}
	code, out, _ := explore1(t, args...)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{string(explore.PropStall), "fails here", "dup_mmap_sem(w)", "copy " + path + " into explore/testdata/", "--replay " + path} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, again, _ := explore1(t, args...); again != out {
		t.Errorf("the same seed printed another output:\n%s\nfirst:\n%s", again, out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	code, rout, _ := explore1(t, "--replay", path)
	if code != 1 || !strings.Contains(rout, string(explore.PropStall)) {
		t.Fatalf("--replay: exit %d:\n%s", code, rout)
	}
	// The replay prints the same steps as the exploration did.
	steps := func(s string) string {
		var b strings.Builder
		for l := range strings.Lines(s) {
			if strings.Contains(l, "] holding") || strings.Contains(l, "]  holding") {
				b.WriteString(l)
			}
		}
		return b.String()
	}
	if steps(rout) == "" || steps(rout) != steps(out) {
		t.Errorf("the replay's steps differ:\n%s\nexplore:\n%s", rout, out)
	}
}

// --json prints the common schema with the typed result; nothing failed:
// exit 0.
func TestExploreJSON(t *testing.T) {
	code, out, _ := explore1(t, "reg-vs-fork", "--design", "after", "--schedules", "50", "--json")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var doc report.Document[explorer.SearchParams, explorer.Result]
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Experiment != "explore" || len(doc.Results) != 1 || doc.Params != (explorer.SearchParams{Scenario: "reg-vs-fork", Design: "after", Strategy: "random", Schedules: 50, Seed: 1}) {
		t.Fatalf("document %+v", doc)
	}
	r := doc.Results[0]
	if r.Scenario != "reg-vs-fork" || r.Variant != "after" || r.Schedules != 50 || r.Failures != 0 {
		t.Errorf("result %+v", r)
	}
}
