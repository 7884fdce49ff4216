package live

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	RegisterRole("live-test-parent", func() int {
		// Start a helper, say its pid, and wait to be killed.
		cmd, err := Command(context.Background(), "live-test-sleeper")
		if err != nil {
			return 1
		}
		if err := Start(cmd); err != nil {
			return 1
		}
		fmt.Println(cmd.Process.Pid)
		select {}
	})
	RegisterRole("live-test-sleeper", func() int { select {} })
	RunTests(m)
}

// A helper dies with the run that started it, however the run dies: here
// by SIGKILL, which runs no code of the run.
func TestHelperDiesWithParent(t *testing.T) {
	cmd, err := Command(t.Context(), "live-test-parent")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("parent: %v", err)
	}
	pid, _ := strconv.Atoi(line[:len(line)-1])
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// A pidfd polls readable when its process has exited.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			break
		}
	}
}
