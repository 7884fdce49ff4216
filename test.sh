#!/usr/bin/env bash
# The test command of README.md: every package's tests, then the concurrent
# packages again under the race detector. Live tests need Linux and root; they
# skip with their reason elsewhere.
set -euo pipefail
cd "$(dirname "$0")"
go test -count=1 ./...
race_pkgs=$(go list ./locking/... ./rcu/... ./sched/... ./cpu/... ./kernel/... ./mm/... ./procfs/... ./uprobes/... ./replay/... ./experiment/... 2>/dev/null || true)
if [ -n "$race_pkgs" ]; then
  go test -count=1 -race $race_pkgs
fi
