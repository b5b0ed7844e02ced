package charttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// This file checks a custom resource against the openAPIV3Schema of its
// CustomResourceDefinition the way the API server does on
// `kubectl apply --validate=strict`:
//
//   - the values, with the API server's own validator
//     (k8s.io/kube-openapi/pkg/validation/validate, fed the schema as the
//     apiextensions-apiserver converts it: x-kubernetes-int-or-string is
//     the type [integer, string]): types, required, enum, pattern,
//     minimum and maximum, lengths, items, anyOf/oneOf/allOf/not,
//     nullable, formats;
//   - the fields, with a walk of the schema's structural part (properties,
//     additionalProperties, items) like the API server's pruning, which
//     strict validation turns into errors: a field the schema does not
//     declare is unknown unless x-kubernetes-preserve-unknown-fields
//     keeps it (apiVersion, kind and metadata are known at the root and
//     in an x-kubernetes-embedded-resource);
//   - metadata, decoded strictly into ObjectMeta and checked with
//     apimachinery's ValidateObjectMeta (a DNS subdomain name, valid
//     labels and annotations).
//
// CEL rules (x-kubernetes-validations) are not evaluated: a value that
// reaches a schema carrying them is an error saying so, so that a
// template setting such a field cannot pass unchecked.

// crdDir holds the vendored CustomResourceDefinitions (README.md there
// says where each comes from).
const crdDir = "testdata/crds"

// crd is one vendored CustomResourceDefinition.
type crd struct {
	file     string
	group    string
	kind     string
	versions map[string]crdVersion
}

type crdVersion struct {
	served     bool
	deprecated bool
	schema     *spec.Schema
}

// crdDocument is the part of a CustomResourceDefinition validation reads.
type crdDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name       string `json:"name"`
			Served     bool   `json:"served"`
			Deprecated bool   `json:"deprecated"`
			Schema     struct {
				OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// loadCRDs reads every CustomResourceDefinition of dir, by "group/kind".
func loadCRDs(dir string) (map[string]*crd, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	crds := map[string]*crd{}
	for _, f := range files {
		c, err := loadCRD(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		key := c.group + "/" + c.kind
		if prev, ok := crds[key]; ok {
			return nil, fmt.Errorf("%s and %s both define %s", prev.file, f, key)
		}
		crds[key] = c
	}
	return crds, nil
}

func loadCRD(file string) (*crd, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc crdDocument
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc.APIVersion != "apiextensions.k8s.io/v1" || doc.Kind != "CustomResourceDefinition" {
		return nil, fmt.Errorf("not an apiextensions.k8s.io/v1 CustomResourceDefinition: %s %s", doc.APIVersion, doc.Kind)
	}
	if doc.Spec.Group == "" || doc.Spec.Names.Kind == "" || len(doc.Spec.Versions) == 0 {
		return nil, fmt.Errorf("no group, kind or versions")
	}
	c := &crd{file: file, group: doc.Spec.Group, kind: doc.Spec.Names.Kind, versions: map[string]crdVersion{}}
	for _, v := range doc.Spec.Versions {
		if len(v.Schema.OpenAPIV3Schema) == 0 {
			return nil, fmt.Errorf("version %s has no openAPIV3Schema", v.Name)
		}
		s := new(spec.Schema)
		if err := json.Unmarshal(v.Schema.OpenAPIV3Schema, s); err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
		if err := asAPIServer(s); err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
		c.versions[v.Name] = crdVersion{served: v.Served, deprecated: v.Deprecated, schema: s}
	}
	return c, nil
}

// asAPIServer rewrites s, in place, the way apiextensions-apiserver's
// ConvertJSONSchemaProps does before validating: x-kubernetes-int-or-string
// becomes the type [integer, string]. It refuses $ref, which structural
// schemas cannot have.
func asAPIServer(s *spec.Schema) error {
	if s.Ref.String() != "" {
		return fmt.Errorf("$ref %s in a CRD schema", s.Ref.String())
	}
	if intOrString, _ := s.Extensions.GetBool("x-kubernetes-int-or-string"); intOrString {
		s.Type = spec.StringOrArray{"integer", "string"}
	}
	each := func(m map[string]spec.Schema) error {
		for k, sub := range m {
			if err := asAPIServer(&sub); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			m[k] = sub
		}
		return nil
	}
	list := func(l []spec.Schema) error {
		for i := range l {
			if err := asAPIServer(&l[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := each(s.Properties); err != nil {
		return err
	}
	if err := each(s.PatternProperties); err != nil {
		return err
	}
	if err := each(s.Definitions); err != nil {
		return err
	}
	for _, l := range [][]spec.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		if err := list(l); err != nil {
			return err
		}
	}
	for _, sub := range []*spec.Schema{s.Not, schemaOf(s.AdditionalProperties), schemaOf(s.AdditionalItems)} {
		if sub != nil {
			if err := asAPIServer(sub); err != nil {
				return err
			}
		}
	}
	if s.Items != nil {
		if s.Items.Schema != nil {
			if err := asAPIServer(s.Items.Schema); err != nil {
				return err
			}
		}
		if err := list(s.Items.Schemas); err != nil {
			return err
		}
	}
	return nil
}

func schemaOf(sb *spec.SchemaOrBool) *spec.Schema {
	if sb == nil {
		return nil
	}
	return sb.Schema
}

// crdIssue is one reason a custom resource is refused, at a JSON path
// (spec.kafka.listeners[0].port).
type crdIssue struct {
	path string
	msg  string
}

func (i crdIssue) String() string { return i.path + ": " + i.msg }

// validateCR checks the custom resource doc (YAML, as rendered) against
// its CRD's schema for the document's apiVersion, and returns every
// issue, sorted by path. No issue: the API server would accept it.
func validateCR(c *crd, doc []byte) ([]crdIssue, error) {
	// Strict: a key twice in one mapping is an error, as for kubectl.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	// The API server's decoding: integers as int64, other numbers float64.
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group != c.group || kind != c.kind {
		return nil, fmt.Errorf("%s %s is not a %s/%s (%s)", apiVersion, kind, c.group, c.kind, c.file)
	}
	v, ok := c.versions[version]
	switch {
	case !ok || !v.served:
		var served []string
		for name, v := range c.versions {
			if v.served {
				served = append(served, name)
			}
		}
		sort.Strings(served)
		return []crdIssue{{"apiVersion", fmt.Sprintf("%s is not a served version of %s/%s (%s serves %s)", version, c.group, c.kind, filepath.Base(c.file), strings.Join(served, ", "))}}, nil
	case v.deprecated:
		return []crdIssue{{"apiVersion", fmt.Sprintf("%s of %s/%s is deprecated (%s)", version, c.group, c.kind, filepath.Base(c.file))}}, nil
	}

	var issues []crdIssue
	res := validate.NewSchemaValidator(v.schema, nil, "", strfmt.Default).Validate(obj)
	for _, err := range res.Errors {
		issues = append(issues, openAPIIssue(err))
	}
	issues = append(issues, unknownFields(v.schema, obj, nil, true)...)
	issues = append(issues, metadataIssues(obj["metadata"])...)
	sort.SliceStable(issues, func(i, j int) bool { return issues[i].path < issues[j].path })
	return issues, nil
}

// openAPIIssue turns an error of kube-openapi's validator into an issue
// with its path, as apiextensions-apiserver does. The few errors that are
// not *errors.Validation (a number out of its format's range) end with
// "in <path>".
func openAPIIssue(err error) crdIssue {
	var v *openapierrors.Validation
	if !errors.As(err, &v) || v.Name == "" || v.Name == "." {
		if m := trailingPath.FindStringSubmatch(err.Error()); m != nil {
			return crdIssue{strings.TrimPrefix(m[1], "."), err.Error()}
		}
		return crdIssue{"<root>", err.Error()}
	}
	path := strings.TrimPrefix(v.Name, ".")
	msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), v.Name), " ")
	msg = strings.TrimPrefix(msg, "in body ")
	return crdIssue{path, msg}
}

var trailingPath = regexp.MustCompile(` in (\.?[A-Za-z0-9_.\[\]-]+)$`)

// unknownFields walks value along the structural part of s and returns
// the fields s does not declare. root: s is the resource's own schema.
func unknownFields(s *spec.Schema, value any, path []string, root bool) []crdIssue {
	var issues []crdIssue
	if cel, ok := s.Extensions["x-kubernetes-validations"]; ok {
		issues = append(issues, crdIssue{joinPath(path), fmt.Sprintf("has CEL rules (x-kubernetes-validations) this test does not evaluate: %v", cel)})
	}
	preserve, _ := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields")
	embedded, _ := s.Extensions.GetBool("x-kubernetes-embedded-resource")
	switch v := value.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			at := append(append([]string(nil), path...), "."+k)
			sub, declared := s.Properties[k]
			switch {
			case root && k == "metadata":
				// ObjectMeta's fields: metadataIssues.
			case declared:
				issues = append(issues, unknownFields(&sub, v[k], at, false)...)
			case (root || embedded) && (k == "apiVersion" || k == "kind" || k == "metadata"):
				// Known wherever a resource is.
			case schemaOf(s.AdditionalProperties) != nil:
				issues = append(issues, unknownFields(s.AdditionalProperties.Schema, v[k], at, false)...)
			case preserve || (s.AdditionalProperties != nil && s.AdditionalProperties.Allows):
				// Kept as it is.
			default:
				issues = append(issues, crdIssue{joinPath(at), "unknown field"})
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for i, item := range v {
				at := append(append([]string(nil), path...), fmt.Sprintf("[%d]", i))
				issues = append(issues, unknownFields(s.Items.Schema, item, at, false)...)
			}
		}
	}
	return issues
}

func joinPath(path []string) string {
	if len(path) == 0 {
		return "<root>"
	}
	return strings.TrimPrefix(strings.Join(path, ""), ".")
}

// metadataIssues checks metadata as the API server does for a namespaced
// resource: a key ObjectMeta does not have is unknown, the rest decodes
// strictly into ObjectMeta and passes ValidateObjectMeta (the namespace is
// the release's when the manifest has none, as for helm install).
func metadataIssues(md any) []crdIssue {
	m, ok := md.(map[string]any)
	if !ok {
		return []crdIssue{{"metadata", fmt.Sprintf("must be an object, not %T", md)}}
	}
	var issues []crdIssue
	known := objectMetaFields()
	for k := range m {
		if !known[k] {
			issues = append(issues, crdIssue{"metadata." + k, "unknown field"})
		}
	}
	if len(issues) > 0 {
		return issues
	}
	b, err := json.Marshal(m)
	if err != nil {
		return []crdIssue{{"metadata", err.Error()}}
	}
	var meta metav1.ObjectMeta
	if err := yaml.UnmarshalStrict(b, &meta); err != nil {
		return []crdIssue{{"metadata", err.Error()}}
	}
	if meta.Namespace == "" {
		meta.Namespace = namespace
	}
	for _, e := range apivalidation.ValidateObjectMeta(&meta, true, apivalidation.NameIsDNSSubdomain, fieldpath.NewPath("metadata")) {
		issues = append(issues, crdIssue{e.Field, e.ErrorBody()})
	}
	return issues
}

// objectMetaFields returns the JSON names of ObjectMeta's fields.
func objectMetaFields() map[string]bool {
	known := map[string]bool{}
	t := reflect.TypeFor[metav1.ObjectMeta]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			known[name] = true
		}
	}
	return known
}
