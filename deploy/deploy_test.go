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
	j, err := Parse(Render("node-1", "mmlab:v1"))
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
	if c.Image != "mmlab:v1" {
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

// The sweep manifest is an Indexed Job of unprivileged pods, each running
// one point of mmlab all --full's sim sweep by its completion index into
// its own directory of a shared volume, under one host name.
func TestSweepManifest(t *testing.T) {
	m := RenderSweep("mmlab:v1", 5, 2)
	for _, ph := range []string{ImagePlaceholder, PointsPlaceholder, ParallelismPlaceholder} {
		if bytes.Contains(m, []byte(ph)) {
			t.Errorf("RenderSweep leaves %s", ph)
		}
	}
	j, err := Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	s := j.Spec
	if s.CompletionMode != "Indexed" {
		t.Errorf("completionMode %q, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || *s.Completions != 5 || s.Parallelism == nil || *s.Parallelism != 2 {
		t.Errorf("completions %v, parallelism %v, want 5 and 2", s.Completions, s.Parallelism)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != "Never" || pod.Hostname == "" || pod.NodeName != "" {
		t.Errorf("restartPolicy %q, hostname %q, nodeName %q: want Never, one host name for every point, no node", pod.RestartPolicy, pod.Hostname, pod.NodeName)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if c.Image != "mmlab:v1" || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("image %q, container security %+v, pod security %+v: want the image given, no privileges", c.Image, sc, pod.SecurityContext)
	}
	if c.Resources.Requests["cpu"] != "1" {
		t.Errorf("cpu request %q, want 1: a simulated machine runs one thread at a time", c.Resources.Requests["cpu"])
	}

	args, err := SweepArgs()
	if err != nil {
		t.Fatal(err)
	}
	index := "$(" + IndexVar + ")"
	if len(args) < 2 || args[0] != "all" || !slices.Contains(args, "--full") || flagValue(t, args, "point") != index {
		t.Fatalf("args %q, want mmlab all --full --point %s ...", args, index)
	}
	out := flagValue(t, args, "out")
	if !strings.Contains(out, index) {
		t.Errorf("--out %s: the points would share a directory", out)
	}
	for _, a := range args {
		if rest := strings.ReplaceAll(a, index, ""); strings.Contains(rest, "$(") {
			t.Errorf("argument %q refers to a variable the pod does not have", a)
		}
	}
	// --out is on the shared volume.
	shared := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil && strings.HasPrefix(out, m.MountPath+"/") {
				shared = true
			}
		}
	}
	if !shared {
		t.Errorf("--out %s is not on a persistent volume claim", out)
	}
	if got := ForIndex(args, 7); flagValue(t, got, "point") != "7" || flagValue(t, got, "out") != strings.ReplaceAll(out, index, "7") {
		t.Errorf("ForIndex(7): %q", got)
	}
	if _, err := Parse([]byte(strings.Replace(string(m), "completionMode:", "completionmode:", 1))); err == nil {
		t.Error("a misspelt completionMode parsed")
	}
}
