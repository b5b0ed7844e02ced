// Package charttest tests the Helm chart in deploy/helm/shoal: it renders
// the chart with helm for the default values and each documented
// combination, decodes every manifest strictly into the Kubernetes API
// types with the API server's case-sensitive decoder (an unknown field
// fails), checks the operators' resources against their CRD schemas
// (crd_test.go, crdvalidate_test.go; the schemas vendored with their
// versions in testdata/crds), compares the default render and each
// combination's shoal.yaml with golden files (testdata/golden, which
// compose/config's TestHelmChartConfigs loads with Shoal's own loader),
// checks that values.schema.json refuses bad values by name, that the
// chart's README documents every value, that the bridge's Deployment comes
// with its mappings only (bridge_test.go), that the rendered NOTES say how
// to connect, and that the Dockerfile fits the chart and builds a static
// binary. helm comes from $HELM or the tool cache (scripts/tools.sh).
//
// It is a module of its own so that the Kubernetes API types stay out of
// Shoal's go.mod.
package charttest
