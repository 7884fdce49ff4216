package lockrank

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// treeFiles are the files whose doc comment has a lock-order tree: the
// test finds every tree of the module and wants exactly these.
var treeFiles = []string{"mm/doc.go", "procfs/maps.go", "rcu/rcu.go", "sched/sched.go", "uprobes/doc.go"}

// tree is one "Lock order" tree: the classes it names, and each pair of a
// line and a line it nests inside (outer, inner), with the inner line's
// position.
type tree struct {
	file  string
	pairs map[[2]Class]string
}

// readTrees parses the lock-order trees of the module's Go files: after a
// comment line that starts with "Lock order" or "# Lock order", the first
// run of tab-indented comment lines, whose first word is a class and whose
// indentation (two spaces a level) says what it nests in.
func readTrees(t *testing.T, root string) []tree {
	var trees []tree
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if tr, ok := readTree(t, path, filepath.ToSlash(rel)); ok {
			trees = append(trees, tr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return trees
}

func readTree(t *testing.T, path, rel string) (tree, bool) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tree{file: rel, pairs: map[[2]Class]string{}}
	type entry struct {
		depth int
		c     Class
	}
	var stack []entry
	header, inTree, found := false, false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		text, isComment := strings.CutPrefix(line, "//")
		switch {
		case !header:
			s := strings.TrimPrefix(strings.TrimSpace(text), "# ")
			header = isComment && strings.HasPrefix(s, "Lock order")
			continue
		case !isComment:
			header = false
			continue
		case !strings.HasPrefix(text, "\t"):
			if inTree {
				return tr, true
			}
			continue
		}
		inTree, found = true, true
		body := strings.TrimPrefix(text, "\t")
		name := strings.Fields(body)[0]
		spaces := len(body) - len(strings.TrimLeft(body, " "))
		pos := rel + ":" + strconv.Itoa(n)
		c, ok := ParseClass(name)
		if !ok {
			t.Errorf("%s: %q is not a lock class of lockrank", pos, name)
			continue
		}
		depth := spaces / 2
		for len(stack) > 0 && stack[len(stack)-1].depth >= depth {
			stack = stack[:len(stack)-1]
		}
		if spaces%2 != 0 || depth > len(stack) {
			t.Errorf("%s: %q is indented %d spaces under a line of depth %d", pos, name, spaces, len(stack)-1)
		}
		for _, e := range stack {
			tr.pairs[[2]Class{e.c, c}] = pos
		}
		stack = append(stack, entry{depth, c})
	}
	return tr, found
}

// Each package doc's tree agrees with Order: a line nests only in lines of
// classes Order puts before it, and every pair Order declares is shown by
// some tree.
func TestDocTreesMatchOrder(t *testing.T) {
	trees := readTrees(t, "../..")
	var files []string
	shown := map[[2]Class]bool{}
	for _, tr := range trees {
		files = append(files, tr.file)
		for p, pos := range tr.pairs {
			shown[p] = true
			if p[0] == p[1] {
				t.Errorf("%s: %v nests in itself; a same-class nesting is said in words (a subclass)", pos, p[1])
			} else if !Before(p[0], p[1]) {
				t.Errorf("%s: the tree nests %v in %v, but Order has no %v < %v", pos, p[1], p[0], p[0], p[1])
			}
		}
	}
	slices.Sort(files)
	if !slices.Equal(files, treeFiles) {
		t.Errorf("lock-order trees in %v, want %v", files, treeFiles)
	}
	for _, e := range Edges() {
		if !shown[e] {
			t.Errorf("Order has %v < %v, which no package doc's tree shows", e[0], e[1])
		}
	}
}
