module mmlab

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/prometheus/procfs v0.23.0
	golang.org/x/sys v0.50.0
)
