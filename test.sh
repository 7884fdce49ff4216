#!/usr/bin/env bash
# The test command of README.md: every package's tests; the model packages
# again with the invariant checks built in (-tags invariants); then the
# concurrent packages under the race detector. Live tests need Linux and
# root; they skip with their reason elsewhere. The report's rendering test
# needs Chromium and says so when it skips.
set -euo pipefail
cd "$(dirname "$0")"
go test -count=1 ./...
model_pkgs=$(go list ./mm/... ./procfs/... ./uprobes/... ./kernel/... ./replay/... ./binfmt/... ./explore/...)
go test -count=1 -tags invariants $model_pkgs
race_pkgs=$(go list ./smp/... ./locking/... ./rcu/... ./sched/... ./cpu/... ./kernel/... ./mm/... ./procfs/... ./uprobes/... ./replay/... ./binfmt/... ./explore/... ./experiment/...)
go test -count=1 -race $race_pkgs
