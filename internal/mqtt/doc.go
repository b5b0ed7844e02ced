// Package mqtt is the parent of Shoal's protocol packages: packet (the MQTT
// 3.1.1 and 5.0 codec) and topic (topic names, filters and the subscription
// trie). Both the gateway and the router use them, so neither owns them.
package mqtt
