module mmlab

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/prometheus/procfs v0.23.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)
