package deploy

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// flagValue returns the value that follows --name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, "--"+name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %q: no --%s VALUE", args, name)
	}
	return args[i+1]
}

// bytesOf reads a size as mmlab's --size and Kubernetes' quantities write
// it: a number with an optional K/M/G or Ki/Mi/Gi suffix (powers of 1024).
func bytesOf(t *testing.T, s string) int64 {
	t.Helper()
	num := strings.TrimRight(s, "KMGi")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	switch strings.TrimSuffix(s[len(num):], "i") {
	case "K":
		n <<= 10
	case "M":
		n <<= 20
	case "G":
		n <<= 30
	case "":
	default:
		t.Fatalf("size %q: unknown suffix", s)
	}
	return n
}

func TestManifest(t *testing.T) {
	j, err := Parse(Render("node-1", "registry.example/mmlab:v1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(Render("n", "i"), []byte("NODE_NAME")) || bytes.Contains(Render("n", "i"), []byte("MMLAB_IMAGE")) {
		t.Error("Render leaves a placeholder")
	}
	s := j.Spec
	one := func(name string, p *int32) {
		if p == nil || *p != 1 {
			t.Errorf("%s = %v, want 1", name, p)
		}
	}
	one("parallelism", s.Parallelism)
	one("completions", s.Completions)
	if s.BackoffLimit == nil || *s.BackoffLimit != 0 {
		t.Errorf("backoffLimit = %v, want 0: a failed check must not stall the node again", s.BackoffLimit)
	}
	if d := s.ActiveDeadlineSeconds; d == nil || *d <= 0 || *d > 600 {
		t.Errorf("activeDeadlineSeconds = %v, want a hard limit of at most 10 minutes", d)
	}
	pod := s.Template.Spec
	if j.Metadata.Name != "mmlab-check-node-1" || pod.NodeName != "node-1" {
		t.Errorf("name %q on node %q, want mmlab-check-node-1 on node-1", j.Metadata.Name, pod.NodeName)
	}
	if pod.RestartPolicy != "Never" {
		t.Errorf("restartPolicy = %q, want Never", pod.RestartPolicy)
	}
	c := pod.Containers[0]
	if c.Image != "registry.example/mmlab:v1" {
		t.Errorf("image = %q", c.Image)
	}
	if c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the container is not privileged: live uprobes need root and BPF")
	}

	args, err := CheckArgs()
	if err != nil {
		t.Fatal(err)
	}
	if len(args) < 2 || args[0] != "run" || args[1] != "forkstall" {
		t.Fatalf("args %q, want mmlab run forkstall ...", args)
	}
	if !slices.Contains(args, "--json") {
		t.Errorf("args %q: no --json, so kubectl logs would not hold a document", args)
	}
	if v := flagValue(t, args, "target"); v != "live" {
		t.Errorf("--target %s, want live", v)
	}
	// One attach: one run of one case in one mode with one uprobe.
	if v := flagValue(t, args, "runs"); v != "1" {
		t.Errorf("--runs %s, want 1", v)
	}
	if v := flagValue(t, args, "cases"); strings.Contains(v, ",") || strings.HasPrefix(v, "idle") {
		t.Errorf("--cases %s, want one busy case", v)
	}
	if v := flagValue(t, args, "modes"); v != "multi-1" {
		t.Errorf("--modes %s, want multi-1 (one link, one uprobe)", v)
	}
	size := bytesOf(t, flagValue(t, args, "size"))
	if size > 1<<30 {
		t.Errorf("--size %d bytes, want at most 1 GiB", size)
	}
	if limit := bytesOf(t, c.Resources.Limits["memory"]); limit < size+256<<20 {
		t.Errorf("memory limit %d bytes leaves less than 256 MiB beside the %d-byte busy region", limit, size)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	}) bool {
		return m.MountPath == "/tmp"
	}) {
		t.Error("no writable /tmp for the probed copy of mmlab")
	}
}

func TestParseRejects(t *testing.T) {
	for name, m := range map[string]string{
		"a misspelt field":   strings.Replace(string(Manifest), "activeDeadlineSeconds:", "activeDeadLineSeconds:", 1),
		"a number argument":  strings.Replace(string(Manifest), `- "1"`, `- 1`, 1),
		"two documents":      string(Manifest) + "---\n" + string(Manifest),
		"not a Job":          strings.Replace(string(Manifest), "kind: Job", "kind: Pod", 1),
		"not YAML":           "spec: [",
		"a second container": strings.Replace(string(Manifest), "      volumes:", "        - name: other\n          image: x\n      volumes:", 1),
	} {
		if _, err := Parse([]byte(m)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	j, err := Parse([]byte(strings.Replace(string(Manifest), "/usr/local/bin/mmlab", "/bin/sh", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if args, err := MmlabArgs(j); err == nil {
		t.Errorf("a container running /bin/sh gives mmlab args %q", args)
	}
}
