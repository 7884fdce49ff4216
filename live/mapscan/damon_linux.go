package mapscan

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// damonRoot is where DAMON's sysfs interface lists its kdamonds
// (Documentation/admin-guide/mm/damon/usage.rst).
const damonRoot = "/sys/kernel/mm/damon/admin/kdamonds"

// damonNote describes the kdamonds that are on under root: their pids,
// their contexts' operations and their schemes' actions; "" if none is
// on, or without DAMON. With the paddr operations a kdamond checks and
// reclaims physical pages through their reverse maps (mm/damon/paddr.c:
// damon_pa_mkold() and damon_pa_young() call mm/damon/ops-common.c's
// damon_folio_mkold() and damon_folio_young(), whose rmap_walk() takes an
// anonymous folio's anon_vma lock through folio_lock_anon_vma_read()), so
// it contends with the mapper's mmap and munmap for the anon_vma lock of
// the mapper's region.
func damonNote(root string) string {
	read := func(p ...string) string {
		b, _ := os.ReadFile(filepath.Join(append([]string{root}, p...)...))
		return strings.TrimSpace(string(b))
	}
	count := func(p ...string) int {
		n, _ := strconv.Atoi(read(p...))
		return n
	}
	var on []string
	for k := range count("nr_kdamonds") {
		kd := strconv.Itoa(k)
		if read(kd, "state") != "on" {
			continue
		}
		var ops, actions []string
		for c := range count(kd, "contexts", "nr_contexts") {
			ctx := filepath.Join(kd, "contexts", strconv.Itoa(c))
			ops = append(ops, read(ctx, "operations"))
			for s := range count(ctx, "schemes", "nr_schemes") {
				actions = append(actions, read(ctx, "schemes", strconv.Itoa(s), "action"))
			}
		}
		d := fmt.Sprintf("kdamond %s (pid %s): operations %s", kd, read(kd, "pid"), strings.Join(ops, ","))
		if len(actions) > 0 {
			d += ", schemes " + strings.Join(actions, ",")
		}
		on = append(on, d)
	}
	if len(on) == 0 {
		return ""
	}
	return "DAMON is on: " + strings.Join(on, "; ") + " (a paddr kdamond walks folios' reverse maps under their anon_vma locks, which the mapper's mmap and munmap take: see the slowest calls' wakers)"
}
