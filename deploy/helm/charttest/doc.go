// Package charttest tests the Helm chart in deploy/helm/shoal: it renders
// the chart with helm for the default values and each documented
// combination, decodes every manifest strictly into the Kubernetes API
// types (an unknown field fails), checks the operators' resources against
// their CRD schemas (crd/, with the schemas vendored in testdata/crds),
// and compares the default render with golden files.
//
// It is a module of its own so that the Kubernetes API types stay out of
// Shoal's go.mod.
package charttest
