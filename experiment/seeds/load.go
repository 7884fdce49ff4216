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
	reads := map[string]func([]byte) error{}
	var names []string
	for _, s := range all {
		for _, st := range s.Steps {
			reads[st.Experiment] = st.read
			names = append(names, st.Experiment)
		}
	}
	add := func(name string, b []byte) error {
		exp, err := report.Head(b)
		if err != nil {
			return err
		}
		read, ok := reads[exp]
		if !ok {
			return fmt.Errorf("experiment: %w: got %q, want one of %s", report.ErrUnknownExperiment, exp, strings.Join(names, ", "))
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
		i := slices.IndexFunc(sets, func(s *Set) bool {
			return s.Host.Machine.Hostname == head.Machine.Hostname && s.Host.Machine.Kernel == head.Machine.Kernel
		})
		if i >= 0 {
			if _, dup := sets[i].Docs[exp]; dup {
				return fmt.Errorf("%w: a second %s document of host %s", ErrDuplicate, exp, sets[i].Host.Name)
			}
		} else {
			label := head.Machine.Hostname
			if label == "" {
				label = name
			}
			sets = append(sets, &Set{Host: report.Host{Name: label, Machine: head.Machine}, Docs: Docs{}})
			i = len(sets) - 1
		}
		// The model machines of the host's documents, each once.
		h := &sets[i].Host
		if model := report.ModelLabel(head.ModelMachine); !slices.Contains(strings.Split(h.Model, "; "), model) {
			h.Model = strings.TrimPrefix(h.Model+"; "+model, "; ")
		}
		sets[i].Docs[exp] = b
		sets[i].Interrupted = sets[i].Interrupted || head.Interrupted
		return nil
	}
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
			if err := add(f, b); err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", f, err))
			}
		}
	}
	return sets, bad, nil
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
