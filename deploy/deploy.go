// Package deploy holds the Kubernetes manifests of mmlab and reads them
// back, so that tests can check each manifest and the mmlab command line in
// it: the fleet check (one Job per node running a bounded live fork-stall
// check, mmlab-check.yaml) and the sim sweep (an Indexed Job running one
// point of mmlab all --full's sim sweep per completion index,
// mmlab-sweep.yaml). deploy/README.md says how to run them.
package deploy

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Manifest is mmlab-check.yaml with its placeholders NodePlaceholder and
// ImagePlaceholder.
//
//go:embed mmlab-check.yaml
var Manifest []byte

// The manifest's placeholders, which the per-node loop replaces.
const (
	NodePlaceholder  = "NODE_NAME"
	ImagePlaceholder = "MMLAB_IMAGE"
)

// SweepManifest is mmlab-sweep.yaml with its placeholders ImagePlaceholder,
// PointsPlaceholder and ParallelismPlaceholder.
//
//go:embed mmlab-sweep.yaml
var SweepManifest []byte

// The sweep manifest's placeholders besides the image: the Job's
// completions (the number of points) and parallelism.
const (
	PointsPlaceholder      = "POINTS"
	ParallelismPlaceholder = "PARALLELISM"
)

// IndexVar is the environment variable that the Job controller sets to a
// pod's completion index in an Indexed Job; the sweep's command line
// refers to it as $(IndexVar), which Kubernetes expands.
const IndexVar = "JOB_COMPLETION_INDEX"

// Job is the part of a Kubernetes batch/v1 Job that the manifest uses. It
// is decoded with unknown fields rejected, so a misspelt field (which
// Kubernetes would ignore, silently dropping a time limit) fails the parse.
type Job struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       struct {
		CompletionMode          string `yaml:"completionMode"`
		Parallelism             *int32 `yaml:"parallelism"`
		Completions             *int32 `yaml:"completions"`
		BackoffLimit            *int32 `yaml:"backoffLimit"`
		ActiveDeadlineSeconds   *int64 `yaml:"activeDeadlineSeconds"`
		TTLSecondsAfterFinished *int32 `yaml:"ttlSecondsAfterFinished"`
		Template                struct {
			Metadata Metadata `yaml:"metadata"`
			Spec     PodSpec  `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// Metadata is an object's name and labels.
type Metadata struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

// PodSpec is the part of a pod's spec that the manifest uses.
type PodSpec struct {
	NodeName        string `yaml:"nodeName"`
	Hostname        string `yaml:"hostname"`
	RestartPolicy   string `yaml:"restartPolicy"`
	SecurityContext struct {
		RunAsNonRoot *bool  `yaml:"runAsNonRoot"`
		RunAsUser    *int64 `yaml:"runAsUser"`
		FSGroup      *int64 `yaml:"fsGroup"`
	} `yaml:"securityContext"`
	Tolerations []struct {
		Key      string `yaml:"key"`
		Operator string `yaml:"operator"`
		Effect   string `yaml:"effect"`
	} `yaml:"tolerations"`
	Containers []Container `yaml:"containers"`
	Volumes    []struct {
		Name                  string    `yaml:"name"`
		EmptyDir              *struct{} `yaml:"emptyDir"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
	} `yaml:"volumes"`
}

// Container is the part of a container's spec that the manifest uses.
type Container struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	Command         []string `yaml:"command"`
	Args            []string `yaml:"args"`
	WorkingDir      string   `yaml:"workingDir"`
	SecurityContext struct {
		Privileged               *bool `yaml:"privileged"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// Render returns the manifest for one node and image, as the loop in
// deploy/README.md makes it with sed.
func Render(node, image string) []byte {
	b := bytes.ReplaceAll(Manifest, []byte(NodePlaceholder), []byte(node))
	return bytes.ReplaceAll(b, []byte(ImagePlaceholder), []byte(image))
}

// RenderSweep returns the sweep manifest for an image, a sweep of points
// points and a parallelism, as deploy/README.md makes it with sed.
func RenderSweep(image string, points, parallelism int) []byte {
	b := bytes.ReplaceAll(SweepManifest, []byte(ImagePlaceholder), []byte(image))
	b = bytes.ReplaceAll(b, []byte(PointsPlaceholder), []byte(strconv.Itoa(points)))
	return bytes.ReplaceAll(b, []byte(ParallelismPlaceholder), []byte(strconv.Itoa(parallelism)))
}

// SweepArgs returns the arguments that the sweep manifest's container
// passes to mmlab, without the program and with $(JOB_COMPLETION_INDEX)
// as written ("all", "--full", "--point", "$(JOB_COMPLETION_INDEX)", ...).
func SweepArgs() ([]string, error) {
	j, err := Parse(RenderSweep("image", 1, 1))
	if err != nil {
		return nil, err
	}
	return MmlabArgs(j)
}

// ForIndex returns args with each $(JOB_COMPLETION_INDEX) replaced by
// index, as Kubernetes expands it in the pod of that completion index.
func ForIndex(args []string, index int) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "$("+IndexVar+")", strconv.Itoa(index))
	}
	return out
}

// Parse decodes a manifest of exactly one Job, rejecting fields the Job
// type does not know.
func Parse(manifest []byte) (*Job, error) {
	d := yaml.NewDecoder(bytes.NewReader(manifest))
	d.KnownFields(true)
	var j Job
	if err := d.Decode(&j); err != nil {
		return nil, fmt.Errorf("deploy: parse the manifest: %w", err)
	}
	var extra any
	if err := d.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("deploy: the manifest holds more than one document")
	}
	// YAML reads `- 1` as a number, which a string list in Go accepts but
	// Kubernetes rejects: every item of a command line must be a string.
	var root yaml.Node
	if err := yaml.Unmarshal(manifest, &root); err != nil {
		return nil, fmt.Errorf("deploy: parse the manifest: %w", err)
	}
	if err := stringLists(&root, "command", "args"); err != nil {
		return nil, err
	}
	if j.APIVersion != "batch/v1" || j.Kind != "Job" {
		return nil, fmt.Errorf("deploy: the manifest is a %s %s, want a batch/v1 Job", j.APIVersion, j.Kind)
	}
	if n := len(j.Spec.Template.Spec.Containers); n != 1 {
		return nil, fmt.Errorf("deploy: the Job has %d containers, want 1", n)
	}
	return &j, nil
}

// CheckArgs returns the arguments that the manifest's container passes to
// mmlab, without the program ("run", "forkstall", "--target", "live", ...):
// what a test hands to mmlab's own option checks.
func CheckArgs() ([]string, error) {
	j, err := Parse(Manifest)
	if err != nil {
		return nil, err
	}
	return MmlabArgs(j)
}

// MmlabArgs returns the arguments that j's container passes to mmlab, or an
// error when it runs another program.
func MmlabArgs(j *Job) ([]string, error) {
	c := j.Spec.Template.Spec.Containers[0]
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 || path.Base(argv[0]) != "mmlab" {
		return nil, fmt.Errorf("deploy: the container runs %q, want mmlab", strings.Join(argv, " "))
	}
	return argv[1:], nil
}

// stringLists checks that the values of the given keys, anywhere in n, are
// lists of strings.
func stringLists(n *yaml.Node, keys ...string) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if !slices.Contains(keys, k.Value) {
				continue
			}
			if v.Kind != yaml.SequenceNode {
				return fmt.Errorf("deploy: line %d: %s is not a list", v.Line, k.Value)
			}
			for _, it := range v.Content {
				if it.Kind != yaml.ScalarNode || it.Tag != "!!str" {
					return fmt.Errorf("deploy: line %d: %s item %q is not a string (quote it)", it.Line, k.Value, it.Value)
				}
			}
		}
	}
	for _, c := range n.Content {
		if err := stringLists(c, keys...); err != nil {
			return err
		}
	}
	return nil
}
