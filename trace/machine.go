package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"mmlab/machine"
)

// UserAddrEnd is the end of the user address space of a machine with
// features f: TASK_SIZE plus its last page, never mapped (2^47, or 2^56 with
// 5-level paging). An arena must end at or below it on that machine.
func UserAddrEnd(f machine.Features) uint64 { return f.TaskSize() + PageSize }

// ValidateFor is Validate for a run on a machine with features f: Parse's
// rules, which hold on every machine, and the one that depends on it: the
// arena ends at or below UserAddrEnd(f). Parse cannot check that one, as a
// trace is parsed before a target, and so a machine, is chosen; both
// targets' runners call ValidateFor with their machine's features first,
// so that on one machine they refuse the same Programs with the same error.
// Low addresses need no such rule: the kernel answers for them (a hint
// raised to mmap_min_addr, EPERM for a fixed address below vm.mmap_min_addr
// without CAP_SYS_RAWIO), and the model answers with f.
func (p *Program) ValidateFor(f machine.Features) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if end := UserAddrEnd(f); p.ArenaHi > end {
		paging := "4-level paging"
		if f.LA57 {
			paging = "5-level paging"
		}
		return fmt.Errorf("invalid trace: arena %#x-%#x ends above this machine's user address space, %#x (%s)",
			p.ArenaLo, p.ArenaHi, end, paging)
	}
	return nil
}

// RequiresPrefix starts a trace's comment line naming the machine features
// its golden output depends on, as they were on the host that recorded it:
//
//	# requires: mmap_min_addr=4096 lsm_mmap_min_addr=65536 cap_sys_rawio=true
//
// The keys are those of machine.Features' JSON: mmap_min_addr,
// lsm_mmap_min_addr, cap_sys_rawio, ospke, la57.
const RequiresPrefix = "# requires:"

// Unmet returns "" when a machine with features f has every feature the
// "# requires:" lines of the trace src name, else what differs (for a test
// to skip with), or the error of a malformed line.
func Unmet(src []byte, f machine.Features) (string, error) {
	want, err := RequiredFeatures(src, f)
	if err != nil {
		return "", err
	}
	var unmet []string
	for _, k := range featureKeys {
		if w, g := featureValue(want, k), featureValue(f, k); w != g {
			unmet = append(unmet, fmt.Sprintf("%s=%s (this machine: %s)", k, w, g))
		}
	}
	if len(unmet) == 0 {
		return "", nil
	}
	return "recorded on a machine with " + strings.Join(unmet, ", "), nil
}

// featureKeys are the keys of "# requires:" lines, in the order Unmet
// names them.
var featureKeys = []string{"mmap_min_addr", "lsm_mmap_min_addr", "cap_sys_rawio", "ospke", "la57"}

func featureValue(f machine.Features, key string) string {
	switch key {
	case "mmap_min_addr":
		return strconv.FormatUint(f.MmapMinAddr, 10)
	case "lsm_mmap_min_addr":
		return strconv.FormatUint(f.LSMMmapMinAddr, 10)
	case "cap_sys_rawio":
		return strconv.FormatBool(f.CapSysRawio)
	case "ospke":
		return strconv.FormatBool(f.OSPKE)
	case "la57":
		return strconv.FormatBool(f.LA57)
	}
	return ""
}

// RequiredFeatures returns base with the features the "# requires:" lines
// of the trace src name set to their values: the machine a model run of
// the trace must have to give its golden output, on any host.
func RequiredFeatures(src []byte, base machine.Features) (machine.Features, error) {
	f := base
	for line := range strings.Lines(string(src)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), RequiresPrefix)
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "mmap_min_addr":
				f.MmapMinAddr, err = strconv.ParseUint(v, 10, 64)
			case "lsm_mmap_min_addr":
				f.LSMMmapMinAddr, err = strconv.ParseUint(v, 10, 64)
			case "cap_sys_rawio":
				f.CapSysRawio, err = strconv.ParseBool(v)
			case "ospke":
				f.OSPKE, err = strconv.ParseBool(v)
			case "la57":
				f.LA57, err = strconv.ParseBool(v)
			default:
				err = errors.New("unknown key")
			}
			if err != nil {
				return base, fmt.Errorf("%s %q: want KEY=VALUE with KEY one of %s", RequiresPrefix, kv, strings.Join(featureKeys, ", "))
			}
		}
	}
	return f, nil
}
