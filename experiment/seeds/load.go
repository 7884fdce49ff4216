package seeds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"mmlab/report"
)

// Set is the saved results of one host.
type Set struct {
	Host report.Host
	Docs Docs
	// Interrupted is set when one of its documents says its run was.
	Interrupted bool
	// points are the documents of each sweep read so far (documents with
	// a point), by key in Docs, in index order; Docs holds their merge.
	points map[string][]point
}

// point is one point's document of a sweep and the file it was read from.
type point struct {
	file  string
	index int
	of    int
	b     []byte
}

// Incomplete says, for each sweep of the set that misses points, which of
// its points it holds: "sim/trigger: points 0, 3 of 8".
func (s *Set) Incomplete() []string {
	var lines []string
	for _, key := range slices.Sorted(maps.Keys(s.points)) {
		ps := s.points[key]
		if len(ps) == ps[0].of {
			continue
		}
		var held []string
		for _, p := range ps {
			held = append(held, strconv.Itoa(p.index))
		}
		lines = append(lines, fmt.Sprintf("%s: points %s of %d", key, strings.Join(held, ", "), ps[0].of))
	}
	return lines
}

// Load reads results from directories and JSON files and groups them by
// host (hostname and kernel), in the order first seen. A directory's
// documents are DIR/*.json and DIR/sim/*.json, keyed in Docs as package
// seeds says; a file in a directory named sim is a sim document. It reads
// only the documents of the experiments of all's steps, each checked
// against its experiment's types (report.Read); it leaves out each
// document it refuses and returns, in bad, an error naming the file and
// what is wrong, which wraps report's ErrNotDocument, ErrNewerSchema,
// ErrUnknownExperiment, ErrType, ErrMissing or ErrDomain, or ErrDuplicate
// or ErrMerge. err is for a path that cannot be read or holds no
// documents.
//
// Documents of one host with the same key that each hold a different
// point of one sweep (report.SweepPoint, as `mmlab all --full --point I`
// saves them) are merged into one document (mergePoints); any other
// second document of a key is refused with ErrDuplicate.
func Load(all []*Seed, paths []string) (sets []*Set, bad []error, err error) {
	l := newLoader(all)
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		files := []string{p}
		if fi.IsDir() {
			if files, err = docFiles(p); err != nil {
				return nil, nil, err
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("%s: no result documents (*.json, %s/*.json)", p, SimDir)
			}
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, err
			}
			if err := l.add(f, b); err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", f, err))
			}
		}
	}
	return l.sets, bad, nil
}

// loader is Load's state: the checks of the experiments it reads and the
// sets read so far.
type loader struct {
	reads map[string]func([]byte) error
	names []string // the experiments, in the seeds' order
	sets  []*Set
}

func newLoader(all []*Seed) *loader {
	l := &loader{reads: map[string]func([]byte) error{}}
	for _, s := range all {
		for _, st := range s.Steps {
			l.reads[st.Experiment] = st.read
			l.names = append(l.names, st.Experiment)
		}
	}
	return l
}

// add reads the document b of the file name into the set of its host, or
// says why it refuses it.
func (l *loader) add(name string, b []byte) error {
	exp, err := report.Head(b)
	if err != nil {
		return err
	}
	read, ok := l.reads[exp]
	if !ok {
		return fmt.Errorf("experiment: %w: got %q, want one of %s", report.ErrUnknownExperiment, exp, strings.Join(l.names, ", "))
	}
	if err := read(b); err != nil {
		return err
	}
	var head struct {
		Machine      report.Machine       `json:"machine"`
		ModelMachine *report.ModelMachine `json:"model_machine"`
		Interrupted  bool                 `json:"interrupted"`
		Point        *report.SweepPoint   `json:"point"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err // read decoded the whole document
	}
	if p := head.Point; p != nil && (p.Of < 1 || p.Index >= p.Of) {
		return fmt.Errorf("point: %w: got index %d of %d, want an index from 0 to of-1", report.ErrDomain, p.Index, p.Of)
	}
	key := docKey(name, exp)
	i := slices.IndexFunc(l.sets, func(s *Set) bool {
		return s.Host.Machine.Hostname == head.Machine.Hostname && s.Host.Machine.Kernel == head.Machine.Kernel
	})
	if i < 0 {
		label := head.Machine.Hostname
		if label == "" {
			label = name
		}
		l.sets = append(l.sets, &Set{Host: report.Host{Name: label, Machine: head.Machine}, Docs: Docs{}, points: map[string][]point{}})
		i = len(l.sets) - 1
	}
	set := l.sets[i]
	if _, dup := set.Docs[key]; dup {
		if err := set.addPoint(key, name, head.Point, b, read); err != nil {
			return err
		}
	} else {
		if head.Point != nil {
			set.points[key] = []point{{name, head.Point.Index, head.Point.Of, b}}
		}
		set.Docs[key] = b
	}
	// The model machines of the host's documents, each once.
	h := &set.Host
	if model := report.ModelLabel(head.ModelMachine); !slices.Contains(strings.Split(h.Model, "; "), model) {
		h.Model = strings.TrimPrefix(h.Model+"; "+model, "; ")
	}
	set.Interrupted = set.Interrupted || head.Interrupted
	return nil
}

// addPoint adds the document b of the file name, of point p, to the sweep
// of key, whose document Docs holds: it merges it with the sweep's other
// points, or refuses it with ErrDuplicate (no point, or a point the sweep
// has, or a key whose document is no point) or ErrMerge.
func (s *Set) addPoint(key, name string, p *report.SweepPoint, b []byte, read func([]byte) error) error {
	ps := s.points[key]
	if p == nil || ps == nil {
		return fmt.Errorf("%w: a second %s document of host %s", ErrDuplicate, key, s.Host.Name)
	}
	if p.Of != ps[0].of {
		return fmt.Errorf("%w: %s: point %d of %d, but %s holds point %d of %d", ErrMerge, key, p.Index, p.Of, ps[0].file, ps[0].index, ps[0].of)
	}
	at, found := slices.BinarySearchFunc(ps, p.Index, func(q point, i int) int { return q.index - i })
	if found {
		return fmt.Errorf("%w: a second document of point %d of %s of host %s (the first: %s)", ErrDuplicate, p.Index, key, s.Host.Name, ps[at].file)
	}
	ps = slices.Insert(slices.Clone(ps), at, point{name, p.Index, p.Of, b})
	merged, err := mergePoints(ps)
	if err == nil {
		err = read(merged)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	s.points[key], s.Docs[key] = ps, merged
	return nil
}

// ErrDuplicate is Load's refusal of a second document of one experiment
// from one host that is not another point of one sweep.
var ErrDuplicate = errors.New("duplicate")

// ErrMerge is Load's refusal of a point of a sweep that does not merge
// with the sweep's other points.
var ErrMerge = errors.New("points that do not merge")

// mergePoints merges the documents of a sweep's points, in index order,
// into one: the first point's document with the results of all the
// points in order, the skipped targets of all, interrupted if one was,
// no verdict (each judged its point alone) and no point; its params are
// the points' params, where each list is the union of the points' lists
// in order and each other value must be the same in every point, as must
// model_machine. An error wraps ErrMerge and names the field and the two
// files that differ in it.
func mergePoints(ps []point) ([]byte, error) {
	var doc, params map[string]json.RawMessage
	var results, skipped []json.RawMessage
	interrupted := false
	for i, p := range ps {
		var d, pp map[string]json.RawMessage
		var rs, sk []json.RawMessage
		var in bool
		if err := errors.Join(json.Unmarshal(p.b, &d), json.Unmarshal(d["params"], &pp),
			unmarshalOpt(d["results"], &rs), unmarshalOpt(d["skipped"], &sk), unmarshalOpt(d["interrupted"], &in)); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrMerge, p.file, err)
		}
		results, interrupted = append(results, rs...), interrupted || in
		for _, x := range sk {
			if !slices.ContainsFunc(skipped, func(y json.RawMessage) bool { return compact(x) == compact(y) }) {
				skipped = append(skipped, x)
			}
		}
		if i == 0 {
			doc, params = d, pp
			continue
		}
		differ := func(field string, a, b json.RawMessage) error {
			return fmt.Errorf("%w: %s: %s in %s, %s in %s", ErrMerge, field, compact(a), ps[0].file, compact(b), p.file)
		}
		if compact(d["model_machine"]) != compact(doc["model_machine"]) {
			return nil, differ("model_machine", doc["model_machine"], d["model_machine"])
		}
		for _, k := range slices.Sorted(maps.Keys(pp)) {
			if _, ok := params[k]; !ok {
				return nil, differ("params."+k, nil, pp[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(params)) {
			a, b := params[k], pp[k]
			var la, lb []json.RawMessage
			if json.Unmarshal(a, &la) != nil || json.Unmarshal(b, &lb) != nil {
				if compact(a) != compact(b) {
					return nil, differ("params."+k, a, b)
				}
				continue
			}
			for _, x := range lb {
				if !slices.ContainsFunc(la, func(y json.RawMessage) bool { return compact(x) == compact(y) }) {
					la = append(la, x)
				}
			}
			params[k] = mustMarshal(la)
		}
	}
	doc["params"], doc["results"] = mustMarshal(params), mustMarshal(results)
	delete(doc, "verdict")
	delete(doc, "point")
	delete(doc, "skipped")
	delete(doc, "interrupted")
	if len(skipped) > 0 {
		doc["skipped"] = mustMarshal(skipped)
	}
	if interrupted {
		doc["interrupted"] = mustMarshal(true)
	}
	return json.MarshalIndent(doc, "", "  ")
}

// unmarshalOpt decodes b into v unless b is absent.
func unmarshalOpt(b json.RawMessage, v any) error {
	if b == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

// compact is b without insignificant space, "absent" for none.
func compact(b json.RawMessage) string {
	if b == nil {
		return "absent"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// mustMarshal encodes a value built of decoded JSON, which cannot fail.
func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Page builds the report of sets: the seed sections of the first host and,
// with several hosts, the comparison of every host's verdicts and headlines.
func Page(all []*Seed, sets []*Set) *report.Page {
	p := &report.Page{Title: "mmlab report"}
	if len(sets) == 0 {
		return p
	}
	cmp := &report.Table{Title: "hosts compared", Columns: []string{"host", "kernel", "CPUs"}}
	for _, s := range all {
		cmp.Columns = append(cmp.Columns, "seed "+s.ID)
	}
	for i, set := range sets {
		p.Hosts = append(p.Hosts, set.Host)
		p.Interrupted = p.Interrupted || set.Interrupted
		row := []string{set.Host.Name, set.Host.Machine.Kernel, fmt.Sprint(set.Host.Machine.CPUs)}
		for _, s := range all {
			sec := s.Section(set.Docs)
			if i == 0 {
				p.Seeds = append(p.Seeds, sec)
			}
			cell := sec.Verdict
			if sec.Headline != "" {
				cell = sec.Headline
			}
			row = append(row, cell)
		}
		cmp.Rows = append(cmp.Rows, row)
	}
	p.Title = "mmlab: the three seeds on " + sets[0].Host.Machine.Kernel
	if len(sets) > 1 {
		p.Title = fmt.Sprintf("mmlab: %d hosts compared", len(sets))
		p.Comparison = cmp
	}
	return p
}
