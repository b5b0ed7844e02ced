package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// customGroup reports whether apiVersion's group is not one of
// Kubernetes' own, which are the core group (apiVersion v1), the groups of
// one word (apps, batch, policy, autoscaling) and those under k8s.io and
// kubernetes.io (refused to a CRD without an approval annotation).
func customGroup(apiVersion string) bool {
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok || !strings.Contains(group, ".") {
		return false
	}
	for _, own := range []string{"k8s.io", "kubernetes.io"} {
		if group == own || strings.HasSuffix(group, "."+own) {
			return false
		}
	}
	return true
}

// checkCustomResource checks o, a resource of a custom group, against the
// vendored CRD of its group and kind, and returns what is wrong with it:
// no vendored CRD is wrong too. key is the CRD's "group/kind".
func checkCustomResource(crds map[string]*crd, o Object) (key string, problems []string) {
	group, _, _ := strings.Cut(o.APIVersion, "/")
	key = group + "/" + o.Kind
	def, ok := crds[key]
	if !ok {
		return key, []string{fmt.Sprintf("no CRD of %s in %s: vendor it (and list it in README.md there)", key, crdDir)}
	}
	issues, err := validateCR(def, o.YAML)
	if err != nil {
		return key, []string{err.Error()}
	}
	for _, i := range issues {
		problems = append(problems, i.String())
	}
	return key, problems
}

// TestCRDResources checks every custom resource of every combination,
// and of the operators' modes at their defaults, against its CRD's
// schema, unknown fields refused: the operators' resources are what the
// API server would accept. Every vendored CRD must be rendered by some
// combination.
func TestCRDResources(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) == 0 {
		t.Fatalf("no CRDs in %s", crdDir)
	}
	type renderCase struct {
		name   string
		values []string
		set    []string
	}
	var cases []renderCase
	for _, c := range combinations(t) {
		cases = append(cases, renderCase{name: c.name, values: c.values})
	}
	// The templates' other branches: no optional value set, one node,
	// no NetworkPolicy.
	cases = append(cases, renderCase{name: "operators-defaults", set: []string{
		"kafka.mode=strimzi", "cql.mode=operator", "networkPolicy.enabled=false",
		"kafka.strimzi.replicas=1", "kafka.replicationFactor=1", "cql.operator.members=1", "cql.replicationFactor=1",
	}})
	rendered := map[string][]string{} // CRD → the renders with one
	ran := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ran++
			for _, o := range render(t, c.values, c.set...) {
				if !customGroup(o.APIVersion) {
					continue
				}
				key, problems := checkCustomResource(crds, o)
				rendered[key] = append(rendered[key], c.name)
				for _, p := range problems {
					t.Errorf("%s: %s", o, p)
				}
			}
		})
	}
	if ran < len(cases) || t.Failed() {
		return // -run chose some renders, or some failed: coverage is not known.
	}
	for key, def := range crds {
		if len(rendered[key]) == 0 {
			t.Errorf("nothing renders a %s (%s): add a testdata/values file that does", key, def.file)
		} else {
			t.Logf("%s: rendered by %s", key, strings.Join(rendered[key], ", "))
		}
	}
}

// TestCRDOperatorValuesRefused: the operators' values refuse what their
// resources could not run with, naming the key.
func TestCRDOperatorValuesRefused(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want []string // every one must be in the error
	}{
		{[]string{"kafka.mode=strimzi", "kafka.strimzi.replicas=2"}, []string{"kafka.replicationFactor", "kafka.strimzi.replicas"}},
		{[]string{"cql.mode=operator", "cql.operator.members=2"}, []string{"cql.replicationFactor", "cql.operator.members"}},
		{[]string{"kafka.strimzi.replicaz=3"}, []string{"kafka/strimzi", "replicaz"}},
		{[]string{"kafka.strimzi.replicas=three"}, []string{"kafka/strimzi/replicas"}},
		{[]string{"kafka.strimzi.storage.size=20 GB"}, []string{"kafka/strimzi/storage/size"}},
		{[]string{"kafka.strimzi.version=latest"}, []string{"kafka/strimzi/version"}},
		{[]string{"kafka.strimzi.jvmOptions.-Xmx=2 GB"}, []string{"kafka/strimzi/jvmOptions/-Xmx"}},
		{[]string{"cql.operator.datacenter=DC_1"}, []string{"cql/operator/datacenter"}},
		{[]string{"cql.operator.members=0"}, []string{"cql/operator/members"}},
		{[]string{"cql.operator.version="}, []string{"cql/operator/version"}},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) { refused(t, nil, c.set, c.want) })
	}
}

// TestCRDValidatorRefuses: the validator accepts the chart's resources
// and what their schemas allow, and refuses each kind of mistake, naming
// the field's path.
func TestCRDValidatorRefuses(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	objs := render(t, []string{"testdata/values/strimzi.yaml", "testdata/values/scylla-operator.yaml"})
	base := map[string]Object{}
	for _, o := range objs {
		if customGroup(o.APIVersion) {
			base[o.Kind] = o
		}
	}
	for _, c := range []struct {
		name     string
		kind     string
		edit     edit
		wantPath string // "": valid
		wantMsg  string
	}{
		{"as rendered", "Kafka", nil, "", ""},
		{"as rendered", "KafkaNodePool", nil, "", ""},
		{"as rendered", "ScyllaCluster", nil, "", ""},
		{"int-or-string as an integer", "KafkaNodePool", setAt(int64(2), "spec", "resources", "requests", "cpu"), "", ""},
		{"any broker setting (x-kubernetes-preserve-unknown-fields)", "Kafka", setAt("x", "spec", "kafka", "config", "some.future.setting"), "", ""},

		{"unknown field", "Kafka", setAt(true, "spec", "kafka", "listeners", 0, "tlz"), "spec.kafka.listeners[0].tlz", "unknown field"},
		{"unknown field in spec", "Kafka", setAt(map[string]any{"replicas": int64(3)}, "spec", "zookeeper"), "spec.zookeeper", "unknown field"},
		{"unknown field at the root", "KafkaNodePool", setAt(map[string]any{}, "sepc"), "sepc", "unknown field"},
		{"unknown field in a list of objects", "ScyllaCluster", setAt(int64(3), "spec", "datacenter", "racks", 0, "replicas"), "spec.datacenter.racks[0].replicas", "unknown field"},
		{"unknown field in metadata", "Kafka", setAt("x", "metadata", "labelz"), "metadata.labelz", "unknown field"},
		{"a label's value", "KafkaNodePool", setAt("not a label value", "metadata", "labels", "strimzi.io/cluster"), "metadata.labels", "Invalid value"},
		{"wrong type", "KafkaNodePool", setAt("three", "spec", "replicas"), "spec.replicas", "must be of type integer"},
		{"wrong type of a boolean", "Kafka", setAt("false", "spec", "kafka", "listeners", 0, "tls"), "spec.kafka.listeners[0].tls", "must be of type boolean"},
		{"int-or-string of another type", "KafkaNodePool", setAt(true, "spec", "resources", "limits", "memory"), "spec.resources.limits.memory", "must be of type integer,string"},
		{"not a list", "KafkaNodePool", setAt("broker", "spec", "roles"), "spec.roles", "must be of type array"},
		{"missing required field", "Kafka", deleteAt("spec", "kafka", "listeners"), "spec.kafka.listeners", "is required"},
		{"missing required field of a list item", "Kafka", deleteAt("spec", "kafka", "listeners", 0, "tls"), "spec.kafka.listeners[0].tls", "is required"},
		{"missing spec", "KafkaNodePool", deleteAt("spec"), "spec", "is required"},
		{"enum", "KafkaNodePool", setAt([]any{"broker", "zookeeper"}, "spec", "roles"), "spec.roles[1]", "should be one of"},
		{"pattern", "Kafka", setAt("Plain", "spec", "kafka", "listeners", 0, "name"), "spec.kafka.listeners[0].name", "should match '^[a-z0-9]{1,11}$'"},
		{"pattern of an int-or-string", "KafkaNodePool", setAt("2 GB", "spec", "resources", "requests", "memory"), "spec.resources.requests.memory", "should match"},
		{"minimum", "Kafka", setAt(int64(80), "spec", "kafka", "listeners", 0, "port"), "spec.kafka.listeners[0].port", "greater than or equal to 9092"},
		{"integer, not a fraction", "ScyllaCluster", setAt(2.5, "spec", "datacenter", "racks", 0, "members"), "spec.datacenter.racks[0].members", "must be of type"},
		{"metadata.name", "Kafka", setAt("Shoal_Kafka", "metadata", "name"), "metadata.name", "RFC 1123"},
		{"a version the CRD does not serve", "Kafka", setAt("kafka.strimzi.io/v1beta2", "apiVersion"), "apiVersion", "v1beta2 is not a served version"},
		{"CEL rules not evaluated", "Kafka", setAt(map[string]any{"topologyKey": "topology.kubernetes.io/zone"}, "spec", "kafka", "rack"), "spec.kafka.rack", "x-kubernetes-validations"},
	} {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			o, ok := base[c.kind]
			if !ok {
				t.Fatalf("no %s rendered", c.kind)
			}
			if c.edit != nil {
				var m map[string]any
				if err := yaml.Unmarshal(o.YAML, &m); err != nil {
					t.Fatal(err)
				}
				c.edit(t, m)
				b, err := yaml.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				o.YAML = b
				o.APIVersion, _ = m["apiVersion"].(string)
			}
			_, problems := checkCustomResource(crds, o)
			if c.wantPath == "" {
				for _, p := range problems {
					t.Errorf("refused: %s", p)
				}
				return
			}
			for _, p := range problems {
				if strings.HasPrefix(p, c.wantPath+": ") && strings.Contains(p, c.wantMsg) {
					t.Logf("refused: %s", p)
					return
				}
			}
			t.Errorf("no error at %s saying %q; got:\n%s", c.wantPath, c.wantMsg, strings.Join(problems, "\n"))
		})
	}
}

// TestCRDMissing: a resource of a custom group whose CRD is not vendored
// fails, and Kubernetes' own groups are not custom.
func TestCRDMissing(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	o := Object{APIVersion: "monitoring.coreos.com/v1", Kind: "PodMonitor", Name: "x",
		YAML: []byte("apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec: {}\n")}
	if !customGroup(o.APIVersion) {
		t.Errorf("%s is not a custom group", o.APIVersion)
	}
	if _, problems := checkCustomResource(crds, o); len(problems) != 1 || !strings.Contains(problems[0], "no CRD of monitoring.coreos.com/PodMonitor") {
		t.Errorf("a PodMonitor without its CRD: %q", problems)
	}
	for _, v := range []string{"v1", "apps/v1", "policy/v1", "networking.k8s.io/v1", "autoscaling/v2", "resource.k8s.io/v1", "internal.apiserver.k8s.io/v1alpha1"} {
		if customGroup(v) {
			t.Errorf("%s is taken for a custom group", v)
		}
	}
	for _, v := range []string{"kafka.strimzi.io/v1", "scylla.scylladb.com/v1", "cert-manager.io/v1", "monitoring.coreos.com/v1", "example.com/v1"} {
		if !customGroup(v) {
			t.Errorf("%s is not taken for a custom group", v)
		}
	}
}

// TestCRDVendored: every vendored CRD loads, has a schema for each
// version, and is listed in the README beside it.
func TestCRDVendored(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(crdDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for key, c := range crds {
		if !strings.Contains(readme, "`"+filepath.Base(c.file)+"`") {
			t.Errorf("%s (%s) is not in %s/README.md", filepath.Base(c.file), key, crdDir)
		}
		for name, v := range c.versions {
			if v.schema == nil || len(v.schema.Properties) == 0 {
				t.Errorf("%s %s: an empty schema", key, name)
			}
		}
	}
}

// edit changes a decoded resource.
type edit func(t *testing.T, m map[string]any)

// setAt returns an edit setting value at path (map keys and list indexes).
func setAt(value any, path ...any) edit {
	return func(t *testing.T, m map[string]any) {
		t.Helper()
		switch k := path[len(path)-1].(type) {
		case string:
			parentMap(t, m, path)[k] = value
		case int:
			parent, ok := field(m, path[:len(path)-1]...)
			list, isList := parent.([]any)
			if !ok || !isList || k >= len(list) {
				t.Fatalf("no list with an item %d at %v", k, path[:len(path)-1])
			}
			list[k] = value
		}
	}
}

// deleteAt returns an edit removing the key at path.
func deleteAt(path ...any) edit {
	return func(t *testing.T, m map[string]any) {
		t.Helper()
		k, ok := path[len(path)-1].(string)
		if !ok {
			t.Fatalf("%v: only a key can be deleted", path)
		}
		delete(parentMap(t, m, path), k)
	}
}

// parentMap returns the map holding the last key of path.
func parentMap(t *testing.T, m map[string]any, path []any) map[string]any {
	t.Helper()
	parent, ok := field(m, path[:len(path)-1]...)
	pm, isMap := parent.(map[string]any)
	if !ok || !isMap {
		t.Fatalf("no object at %v", path[:len(path)-1])
	}
	return pm
}
