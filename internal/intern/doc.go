// Package intern keeps one copy of strings that many long-lived records
// repeat (tenants, gateway ids), so that each record does not hold an
// allocation of its own: with many small records the allocation costs more
// than its bytes, since a few survivors keep whole spans of the heap.
package intern
