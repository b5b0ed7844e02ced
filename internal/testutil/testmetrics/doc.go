// Package testmetrics gives a role's tests OpenTelemetry providers whose
// meter provider is the SDK's, read through a manual reader: a test
// records through the role's own instruments, then reads what they hold
// (a counter's sum, a gauge's value, a histogram's count and sum) by
// instrument name and attributes. Only tests import it.
package testmetrics
