// Package internal groups what several of Shoal's roles share and nothing
// outside the module may import: the MQTT codec (internal/mqtt/packet), topic
// names, filters and the subscription trie (internal/mqtt/topic), and later
// configuration, telemetry, buffer pools and the view-store adapters.
package internal
