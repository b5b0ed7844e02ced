//go:build !unix

package main

import "time"

// processCPU is not measured off Unix: the CPU figures are then zero.
func processCPU() time.Duration { return 0 }
