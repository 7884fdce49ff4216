package report

import (
	"errors"
	"testing"
)

// What is no JSON object with an experiment's name is no document; the
// message says what was there.
func TestHeadRefuses(t *testing.T) {
	for _, c := range []struct{ in, msg string }{
		{``, "not a result document of mmlab: EOF"},
		{`[1]`, "not a result document of mmlab: got a list, want a JSON object"},
		{`{"experiment": "mapslock"} {}`, "not a result document of mmlab: more after the JSON value"},
		{`{"experiment": 3}`, "not a result document of mmlab: experiment: got 3, want the experiment's name"},
		{`{"experiment": ""}`, `not a result document of mmlab: experiment: got "", want the experiment's name`},
	} {
		_, err := Head([]byte(c.in))
		if err == nil || err.Error() != c.msg || !errors.Is(err, ErrNotDocument) {
			t.Errorf("%q: %v, want %q", c.in, err, c.msg)
		}
	}
	if exp, err := Head([]byte(`{"experiment": "mapslock"}`)); exp != "mapslock" || err != nil {
		t.Errorf("a document of version 1: %q, %v", exp, err)
	}
}
