package trace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"mmlab/machine"
)

// DependsPrefix starts the comment line of a trace whose output depends on
// machine features, naming them:
//
//	# depends on: ospke
//	# depends on: mmap_min_addr lsm_mmap_min_addr cap_sys_rawio
//
// Such a trace has one golden per setting of those features,
// NAME.SETTING.golden (Setting), each recorded live on a host of that
// setting; a trace without the line has one NAME.golden, which holds on
// every machine.
const DependsPrefix = "# depends on:"

// FeatureKeys are the keys a depends line may name, in the order a setting
// lists them: the JSON names of machine.Features' fields.
var FeatureKeys = []string{"ospke", "la57", "mmap_min_addr", "lsm_mmap_min_addr", "cap_sys_rawio"}

// ErrDepends marks a malformed depends line.
var ErrDepends = errors.New("bad depends line")

// Depends returns the feature keys the depends line of the trace src names,
// in FeatureKeys order; none for a trace without one.
func Depends(src []byte) ([]string, error) {
	var keys []string
	for line := range strings.Lines(string(src)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), DependsPrefix)
		if !ok {
			continue
		}
		for _, k := range strings.Fields(rest) {
			if !slices.Contains(FeatureKeys, k) {
				return nil, fmt.Errorf("%w: %q: want keys of %s", ErrDepends, k, strings.Join(FeatureKeys, ", "))
			}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return slices.Index(FeatureKeys, a) - slices.Index(FeatureKeys, b) })
	return keys, nil
}

// Setting names the setting of f's features keys, one part per key joined
// by dots: ospke "pku" or "nopku", la57 "la57" or "nola57", mmap_min_addr
// "minaddrN", lsm_mmap_min_addr "lsmN", cap_sys_rawio "rawio" or
// "norawio" ("minaddr4096.lsm65536.rawio").
func Setting(f machine.Features, keys []string) string {
	yes := func(b bool, y, n string) string {
		if b {
			return y
		}
		return n
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		switch k {
		case "ospke":
			parts[i] = yes(f.OSPKE, "pku", "nopku")
		case "la57":
			parts[i] = yes(f.LA57, "la57", "nola57")
		case "mmap_min_addr":
			parts[i] = "minaddr" + strconv.FormatUint(f.MmapMinAddr, 10)
		case "lsm_mmap_min_addr":
			parts[i] = "lsm" + strconv.FormatUint(f.LSMMmapMinAddr, 10)
		case "cap_sys_rawio":
			parts[i] = yes(f.CapSysRawio, "rawio", "norawio")
		}
	}
	return strings.Join(parts, ".")
}

// SettingFeatures returns base with the features the setting names set:
// the inverse of Setting, so that a golden recorded on any host can be
// checked against the model of its own machine everywhere.
func SettingFeatures(setting string, base machine.Features) (machine.Features, error) {
	f := base
	for p := range strings.SplitSeq(setting, ".") {
		var err error
		switch {
		case p == "pku" || p == "nopku":
			f.OSPKE = p == "pku"
		case p == "la57" || p == "nola57":
			f.LA57 = p == "la57"
		case p == "rawio" || p == "norawio":
			f.CapSysRawio = p == "rawio"
		case strings.HasPrefix(p, "minaddr"):
			f.MmapMinAddr, err = strconv.ParseUint(p[len("minaddr"):], 10, 64)
		case strings.HasPrefix(p, "lsm"):
			f.LSMMmapMinAddr, err = strconv.ParseUint(p[len("lsm"):], 10, 64)
		default:
			err = errors.New("unknown part")
		}
		if err != nil {
			return base, fmt.Errorf("setting %q: part %q: %w", setting, p, ErrDepends)
		}
	}
	return f, nil
}

// A Golden is one recorded output of a trace: its file and, for a trace
// that depends on features, the setting it was recorded under ("" for
// NAME.golden).
type Golden struct {
	Path, Setting string
}

// GoldenPath returns the golden of the trace at tracePath, whose text is
// src, for a machine with features f: NAME.golden, or NAME.SETTING.golden
// for a trace with a depends line. The file may not exist yet: a setting's
// golden is recorded on a host of that setting.
func GoldenPath(tracePath string, src []byte, f machine.Features) (Golden, error) {
	keys, err := Depends(src)
	if err != nil || len(keys) == 0 {
		return Golden{Path: strings.TrimSuffix(tracePath, ".trace") + ".golden"}, err
	}
	s := Setting(f, keys)
	return Golden{Path: strings.TrimSuffix(tracePath, ".trace") + "." + s + ".golden", Setting: s}, nil
}

// Goldens lists the goldens recorded for the trace at tracePath.
func Goldens(tracePath string) []Golden {
	base := strings.TrimSuffix(tracePath, ".trace")
	var gs []Golden
	if _, err := os.Stat(base + ".golden"); err == nil {
		gs = append(gs, Golden{Path: base + ".golden"})
	}
	files, _ := filepath.Glob(base + ".*.golden")
	for _, p := range files {
		gs = append(gs, Golden{Path: p, Setting: strings.TrimSuffix(strings.TrimPrefix(p, base+"."), ".golden")})
	}
	return gs
}
