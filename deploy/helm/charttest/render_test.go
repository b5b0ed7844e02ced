package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "../shoal"

// release and namespace of every render: golden files depend on them.
// kubeVersion is the Kubernetes version renders and lint assume: helm
// built from its Go module (scripts/tools.sh) defaults to v1.20, older
// than the chart's kubeVersion.
const (
	release     = "shoal"
	namespace   = "mqtt"
	kubeVersion = "1.31.0"
)

// helmBin finds helm: $HELM, else the tool cache scripts/tools.sh fills
// (and prints), where `make test` builds it.
var helmBin = sync.OnceValues(func() (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	out, err := exec.Command("../../../scripts/tools.sh").Output()
	if err != nil {
		return "", fmt.Errorf("scripts/tools.sh: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "helm"), nil
})

// helm runs helm with args and returns its standard output, or an error
// holding its standard error.
func helm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := helmBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// combination is one documented way to install the chart: values files of
// testdata/values (applied in order over the defaults).
type combination struct {
	name   string
	values []string
}

// combinations lists every combination the chart's README documents.
// "default" is the chart's own values; the others are files of
// testdata/values named after them.
func combinations(t testing.TB) []combination {
	t.Helper()
	files, err := filepath.Glob("testdata/values/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := []combination{{name: "default"}}
	for _, f := range files {
		out = append(out, combination{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), values: []string{f}})
	}
	return out
}

// templateArgs returns helm's arguments that render the chart with the
// given values files and --set pairs.
func templateArgs(values []string, set ...string) []string {
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// Object is one rendered manifest.
type Object struct {
	Source     string // the template it came from (helm's "# Source:")
	APIVersion string
	Kind       string
	Name       string
	YAML       []byte         // the document as rendered
	Fields     map[string]any // the document decoded loosely
}

func (o Object) String() string { return o.Kind + "/" + o.Name + " (" + o.Source + ")" }

// render renders the chart and splits the output into objects. It fails
// the test when helm does.
func render(t testing.TB, values []string, set ...string) []Object {
	t.Helper()
	out, err := helm(t, templateArgs(values, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := splitManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: (.*)$`)

// splitManifests splits helm template's output into its documents,
// skipping empty ones.
func splitManifests(out []byte) ([]Object, error) {
	var objs []Object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o Object
		if m := sourceLine.FindStringSubmatch(doc); m != nil {
			o.Source = m[1]
		}
		if err := yaml.Unmarshal([]byte(doc), &o.Fields); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", o.Source, err, doc)
		}
		if len(o.Fields) == 0 {
			continue
		}
		o.YAML = []byte(doc)
		o.APIVersion, _ = o.Fields["apiVersion"].(string)
		o.Kind, _ = o.Fields["kind"].(string)
		if md, ok := o.Fields["metadata"].(map[string]any); ok {
			o.Name, _ = md["name"].(string)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Name == "" {
			return nil, fmt.Errorf("%s: a document without apiVersion, kind or metadata.name:\n%s", o.Source, doc)
		}
		objs = append(objs, o)
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].String() < objs[j].String() })
	return objs, nil
}

// find returns the object of kind and name, failing the test when there
// is none.
func find(t testing.TB, objs []Object, kind, name string) Object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			return o
		}
	}
	var have []string
	for _, o := range objs {
		have = append(have, o.String())
	}
	t.Fatalf("no %s/%s among:\n%s", kind, name, strings.Join(have, "\n"))
	return Object{}
}

// field walks o's fields by keys (strings for maps, ints for lists).
func field(o map[string]any, path ...any) (any, bool) {
	var cur any = o
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil, false
			}
			cur = l[k]
		}
	}
	return cur, true
}

// stringField returns the string at path in o's fields, failing the test
// when there is none.
func stringField(t testing.TB, o Object, path ...any) string {
	t.Helper()
	v, ok := field(o.Fields, path...)
	if !ok {
		t.Fatalf("%s: no %v", o, path)
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s: %v is a %T, not a string", o, path, v)
	}
	return s
}
