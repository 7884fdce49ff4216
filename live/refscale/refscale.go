// Package refscale is the live side of experiment refscale: the kernel's
// own refscale module (kernel/rcu/refscale.c, CONFIG_RCU_REF_SCALE_TEST),
// which runs when it is loaded and reports in the kernel log. mmlab loads no
// module, so the live target runs only where the module is already in the
// kernel; it says what is missing otherwise.
package refscale

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"mmlab/experiment"
	"mmlab/experiment/refscale"
	"mmlab/live"
)

// SysModule is where a loaded or built-in refscale shows itself.
const SysModule = "/sys/module/refscale"

// Run checks for the module and, as mmlab neither loads it nor reads its
// results from the kernel log, is skipped: ErrNotSupported naming what is
// there and what is missing.
func Run(context.Context, *refscale.Options, experiment.Env, func(refscale.Result)) error {
	if _, err := os.Stat(SysModule); err == nil {
		return live.Unsupported("refscale is in the kernel (%s) but runs only at its load, with the parameters it was given, and reports in the kernel log; mmlab does not load modules", SysModule)
	}
	if f := moduleFile(); f != "" {
		return live.Unsupported("the refscale module is not loaded (no %s; %s is there, and mmlab does not load modules: modprobe refscale scale_type=...)", SysModule, f)
	}
	return live.Unsupported("the kernel has no refscale: no %s and no refscale.ko under /lib/modules/%s (CONFIG_RCU_REF_SCALE_TEST)", SysModule, release())
}

// moduleFile returns the running kernel's refscale module file, or "".
func moduleFile() string {
	for _, ext := range []string{"", ".xz", ".zst", ".gz"} {
		f := filepath.Join("/lib/modules", release(), "kernel/kernel/rcu/refscale.ko"+ext)
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}

// release is the running kernel's release (uname -r).
func release() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "$(uname -r)"
	}
	return strings.TrimSpace(string(b))
}
