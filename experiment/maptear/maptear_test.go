package maptear

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
)

// parse parses args into the default options, as `mmlab run maptear` does.
func parse(args ...string) (*Options, error) {
	o := NewOptions()
	return o, experiment.ParseOptions(o, args...)
}

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		bad  string // what the error names; "" for none
	}{
		{nil, ""},
		{[]string{"--reads", "0"}, ""},
		{[]string{"--reads", "0", "--duration", "0"}, "--reads 0 with --duration 0"},
		{[]string{"--reads", "5", "--duration", "0"}, ""},
		{[]string{"--reads", "-3"}, "--reads -3"},
		{[]string{"--duration", "-1s"}, "--duration -1s"},
		{[]string{"--cases", "split,nope"}, `"nope"`},
		{[]string{"--cases", ""}, "--cases is empty"},
		{[]string{"--file", "status"}, `--file "status"`},
		{[]string{"--file", "smaps", "--pin", "--cases", "remap"}, ""},
	} {
		_, err := parse(c.args...)
		if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("%q: %v, want an error naming %q", c.args, err, c.bad)
		}
	}
	o, _ := parse()
	if !slices.Equal(o.Cases, Cases) || o.File != "maps" || o.Duration.D() != 2*time.Second || o.Reads != 0 {
		t.Errorf("defaults: %+v", o)
	}
}

// The document's params keep their keys: cases, duration_ms, file, pin,
// reads.
func TestParamsJSON(t *testing.T) {
	o, _ := parse("--duration", "1500ms", "--reads", "7")
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cases":["split","resize","remap"],"file":"maps","reads":7,"duration_ms":1500,"pin":false}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// A case that made no read is insufficient, never ok; a gap fails.
func TestVerdict(t *testing.T) {
	row := experiment.LiveRow
	ok := Result{Row: row, Case: "split", Reads: 10, Queries: 10}
	none := Result{Row: row, Case: "resize"}
	torn := Result{Row: row, Case: "remap", Reads: 10, Gaps: 1}
	for _, c := range []struct {
		rs     []Result
		prefix string
		failed bool
	}{
		{[]Result{ok}, "verdict: ok", false},
		{[]Result{ok, none}, "verdict: insufficient", true},
		{[]Result{ok, none, torn}, "verdict: torn (live kernel remap)", true},
	} {
		line, failed := Verdict(nil, c.rs)
		if !strings.HasPrefix(line, c.prefix) || failed != c.failed {
			t.Errorf("%+v: %q %v, want %q %v", c.rs, line, failed, c.prefix, c.failed)
		}
	}
	var b bytes.Buffer
	Table(&b, nil, []Result{ok, none, torn})
	for _, want := range []string{" ok", " insufficient", " TORN"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
