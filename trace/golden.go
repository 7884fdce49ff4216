package trace

import (
	"os"
	"path/filepath"
	"strings"

	"mmlab/machine"
)

// A golden's setting: the features its output depends on. A trace whose
// output differs with protection keys has one golden per setting,
// NAME.pku.golden and NAME.nopku.golden, each recorded live on a host of
// that kind; any other trace has one NAME.golden, which must hold under
// every setting.
const (
	SettingPKU   = "pku"
	SettingNoPKU = "nopku"
)

// Setting names f's golden setting.
func Setting(f machine.Features) string {
	if f.OSPKE {
		return SettingPKU
	}
	return SettingNoPKU
}

// GoldenPath returns the golden of the trace at tracePath for the setting
// of f: NAME.golden when the trace has one for every setting, else
// NAME.SETTING.golden (which may not exist yet: it is recorded on a host of
// that setting). perSetting says which.
func GoldenPath(tracePath string, f machine.Features) (path string, perSetting bool) {
	base := strings.TrimSuffix(tracePath, ".trace")
	if _, err := os.Stat(base + ".golden"); err == nil {
		return base + ".golden", false
	}
	if m, _ := filepath.Glob(base + ".*pku.golden"); len(m) == 0 {
		return base + ".golden", false
	}
	return base + "." + Setting(f) + ".golden", true
}
