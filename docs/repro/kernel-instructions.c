// The init of kernel-instructions.sh's initramfs: run as PID 1 of a kernel
// booted in QEMU's TCG with -icount shift=0, where one nanosecond of guest
// time is one guest instruction, so that every time it prints is an
// instruction count. It mounts what mmlab's live trigger needs, times a
// getpid(2) loop and an openat(2)+close(2) loop of /dev/null, runs the
// command line of /args (mmlab's trigger), and powers the machine off.
//
// Build: gcc -static -O2 -o init kernel-instructions.c
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void getpid_op(void) { syscall(SYS_getpid); }

static void open_close_op(void) {
	long fd = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY);
	syscall(SYS_close, fd);
}

static void empty_op(void) {}

// per returns the least, over 5 rounds, of the nanoseconds per call of op,
// after a warm-up of n/10 calls.
static double per(long n, void (*volatile op)(void)) {
	for (long i = 0; i < n / 10; i++)
		op();
	double best = 1e18;
	for (int r = 0; r < 5; r++) {
		double t = now();
		for (long i = 0; i < n; i++)
			op();
		double d = (now() - t) / n;
		if (d < best)
			best = d;
	}
	return best;
}

int main(void) {
	mkdir("/proc", 0755);
	mkdir("/sys", 0755);
	mkdir("/dev", 0755);
	mkdir("/tmp", 0755);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("tmpfs", "/tmp", "tmpfs", 0, NULL);
	mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL);
	for (int round = 0; round < 2; round++) {
		double loop = per(1000000, empty_op);
		printf("counts: call loop %.1f, getpid %.1f, openat+close %.1f instructions per call\n",
		       loop, per(200000, getpid_op), per(50000, open_close_op));
	}
	fflush(stdout);
	char args[4096] = {0}, *argv[64];
	int fd = open("/args", O_RDONLY), argc = 0;
	if (fd >= 0 && read(fd, args, sizeof args - 1) > 0) {
		for (char *tok = strtok(args, " \n"); tok && argc < 63; tok = strtok(NULL, " \n"))
			argv[argc++] = tok;
		argv[argc] = NULL;
	}
	if (argc > 0) {
		pid_t pid = fork();
		if (pid == 0) {
			chdir("/tmp");
			char *envp[] = {"HOME=/tmp", "TMPDIR=/tmp", "PATH=/bin", NULL};
			execve(argv[0], argv, envp);
			perror("execve");
			_exit(127);
		}
		waitpid(pid, NULL, 0);
	}
	printf("counts: done\n");
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
