package seeds

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"mmlab/report"
)

// Set is the saved results of one host.
type Set struct {
	Host report.Host
	Docs Docs
	// Interrupted is set when one of its documents says its run was.
	Interrupted bool
}

// Load reads results from directories and JSON files and groups them by
// host (hostname and kernel), in the order first seen. It reads only the
// documents of the experiments of all's steps, each checked against its
// experiment's types (report.Read); it leaves out each document it refuses
// and returns, in bad, an error naming the file and what is wrong, which
// wraps report's ErrNotDocument, ErrNewerSchema, ErrUnknownExperiment,
// ErrType, ErrMissing or ErrDomain, or ErrDuplicate. err is for a path
// that cannot be read or holds no documents.
func Load(all []*Seed, paths []string) (sets []*Set, bad []error, err error) {
	l := newLoader(all)
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		files := []string{p}
		if fi.IsDir() {
			if files, err = filepath.Glob(filepath.Join(p, "*.json")); err != nil {
				return nil, nil, err
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("%s: no result documents (*.json)", p)
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
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err // read decoded the whole document
	}
	i := slices.IndexFunc(l.sets, func(s *Set) bool {
		return s.Host.Machine.Hostname == head.Machine.Hostname && s.Host.Machine.Kernel == head.Machine.Kernel
	})
	if i >= 0 {
		if _, dup := l.sets[i].Docs[exp]; dup {
			return fmt.Errorf("%w: a second %s document of host %s", ErrDuplicate, exp, l.sets[i].Host.Name)
		}
	} else {
		label := head.Machine.Hostname
		if label == "" {
			label = name
		}
		l.sets = append(l.sets, &Set{Host: report.Host{Name: label, Machine: head.Machine}, Docs: Docs{}})
		i = len(l.sets) - 1
	}
	// The model machines of the host's documents, each once.
	h := &l.sets[i].Host
	if model := report.ModelLabel(head.ModelMachine); !slices.Contains(strings.Split(h.Model, "; "), model) {
		h.Model = strings.TrimPrefix(h.Model+"; "+model, "; ")
	}
	l.sets[i].Docs[exp] = b
	l.sets[i].Interrupted = l.sets[i].Interrupted || head.Interrupted
	return nil
}

// ErrDuplicate is Load's refusal of a second document of one experiment
// from one host.
var ErrDuplicate = errors.New("duplicate")

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
