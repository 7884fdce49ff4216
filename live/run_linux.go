package live

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// RunName is this process's name in what it leaves outside its memory
// (tracefs instances, temporary directories, uprobe_events groups): its
// pid, its start time in clock ticks after boot (field 22 of /proc/PID/stat,
// which a reused pid does not repeat) and the inode of its pid namespace,
// joined by sep. Dead tells a name of a run that has ended.
func RunName(sep string) string {
	runNameOnce.Do(func() {
		pid := os.Getpid()
		runID = [3]string{strconv.Itoa(pid), startTime(strconv.Itoa(pid)), pidNS("self")}
	})
	return strings.Join(runID[:], sep)
}

var (
	runNameOnce sync.Once
	runID       [3]string // pid, start time, pid namespace
)

// Dead reports whether name begins with the RunName(sep) of a run that has
// ended: its pid namespace is this process's and no process with its pid
// started at its start time. A name of another pid namespace is never
// dead, since this process cannot see that namespace's processes, nor is
// one that does not parse.
func Dead(name, sep string) bool {
	f := strings.SplitN(name, sep, 4)
	if len(f) < 3 {
		return false
	}
	if _, err := strconv.Atoi(f[0]); err != nil || f[1] == "" || f[2] != pidNS("self") {
		return false
	}
	return startTime(f[0]) != f[1]
}

// startTime is field 22 of /proc/PID/stat, or "" when no such process is
// or it has exited.
func startTime(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "" // a zombie has ended
	}
	return f[19] // fields 3.. after the name: 22 is the 20th
}

// pidNS is the inode number of the pid namespace of process pid ("self").
func pidNS(pid string) string {
	s, err := os.Readlink("/proc/" + pid + "/ns/pid")
	if err != nil {
		return ""
	}
	// "pid:[4026531836]"
	return strings.TrimSuffix(strings.TrimPrefix(s, "pid:["), "]")
}

// MkdirRunTemp creates a temporary directory in base named prefix, this
// run's RunName and a random part, which SweepRunTemp removes once this run
// has ended.
func MkdirRunTemp(base, prefix string) (string, error) {
	return os.MkdirTemp(base, prefix+RunName("-")+"-")
}

// SweepRunTemp removes the directories MkdirRunTemp made in each of bases
// with prefix for runs that are no longer alive, and returns them.
func SweepRunTemp(bases []string, prefix string) []string {
	var gone []string
	for _, base := range bases {
		dirs, _ := filepath.Glob(filepath.Join(base, prefix+"*"))
		for _, dir := range dirs {
			if Dead(strings.TrimPrefix(filepath.Base(dir), prefix), "-") && os.RemoveAll(dir) == nil {
				gone = append(gone, dir)
			}
		}
	}
	return gone
}

// execTempBases are the directories where MkdirExecTemp may create its
// directory: the temporary directory, then the user's cache directory (a
// /tmp mounted noexec is common).
func execTempBases() []string {
	bases := []string{os.TempDir()}
	if d, err := os.UserCacheDir(); err == nil {
		bases = append(bases, d)
	}
	return bases
}

// MkdirExecTemp returns a fresh directory of this run (MkdirRunTemp) with
// prefix on the first of execTempBases whose filesystem allows exec, for
// an executable the run writes and runs.
func MkdirExecTemp(prefix string) (string, error) {
	for _, base := range execTempBases() {
		var st unix.Statfs_t
		if unix.Statfs(base, &st) == nil && st.Flags&unix.ST_NOEXEC == 0 {
			return MkdirRunTemp(base, prefix)
		}
	}
	return "", errors.New("no temporary directory on a filesystem that allows exec")
}

// SweepExecTemp removes the directories MkdirExecTemp made with prefix
// for runs that are no longer alive (SweepRunTemp), and returns them.
func SweepExecTemp(prefix string) []string { return SweepRunTemp(execTempBases(), prefix) }
