module github.com/shoal-mqtt/shoal/bench/trie

go 1.26.0

require (
	github.com/mochi-mqtt/server/v2 v2.7.9
	github.com/shoal-mqtt/shoal v0.0.0-00010101000000-000000000000
)

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/rs/xid v1.4.0 // indirect
)

replace github.com/shoal-mqtt/shoal => ../..
