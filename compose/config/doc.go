// Package config is Shoal's typed configuration: one section per role, the
// defaults, and the three ways to set a value — a YAML file (--config or
// SHOAL_CONFIG), SHOAL_* environment variables, and command-line flags, each
// overriding the one before. Validate names the bad key.
package config
