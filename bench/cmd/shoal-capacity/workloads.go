package main

// The fleets the model sizes: the (1M, 10M and 100M devices at
// one QoS 1 message a minute; 1M msg/s point to point; a 1 → 100k
// fan-out) and the loads of the published tests they are compared with.
var workloads = []workload{
	{Name: "1M devices, 1 msg/min", Devices: 1e6, Rate: 1e6 / 60, Payload: 100, Phase: phasePersistent, Persistent: true},
	{Name: "10M devices, 1 msg/min", Devices: 1e7, Rate: 1e7 / 60, Payload: 100, Phase: phasePersistent, Persistent: true},
	{Name: "100M devices, 1 msg/min", Devices: 1e8, Rate: 1e8 / 60, Payload: 100, Phase: phasePersistent, Persistent: true},
	{Name: "1M msg/s point to point", Devices: 2e5, Rate: 1e6, Payload: 62, Phase: phasePersistent, Persistent: true},
	{Name: "1 → 100k fan-out, 1 msg/s", Devices: 1e5 + 1, Rate: 1, Fanout: 1e5, Payload: 64, Phase: phaseFanout},
	{Name: "EMQX's load: 100M, 1M msg/s 1:1", Devices: 1e8, Rate: 1e6, Payload: 100, Phase: phaseQoS1},
	{Name: "TBMQ's load: 100M, 3M msg/s in", Devices: 1e8, Rate: 3e6, Payload: 114, Phase: phasePersistent, Persistent: true},
}

// others are the published figures a workload is compared with: what
// was run, and what the count includes.
var others = []struct {
	Workload, Who, Nodes, Load, Source string
}{
	{"EMQX's load: 100M, 1M msg/s 1:1", "EMQX 5.0", "23 EMQX nodes (3 core, 20 replicant); the generators not counted",
		"100M connections, each subscribed to a topic of its own; 1:1 publish/subscribe, 90k msg/s steady, 1M msg/s at the peak",
		"https://www.emqx.com/en/blog/reaching-100m-mqtt-connections-with-emqx-5-0"},
	{"TBMQ's load: 100M, 3M msg/s in", "TBMQ", "25 broker nodes and 9 Kafka brokers, and one PostgreSQL (RDS) instance not counted",
		"100M publishers of ~114 B, 3M msg/s in, each message to one of 500 persistent application subscribers",
		"https://thingsboard.io/docs/mqtt-broker/reference/100m-connections-performance-test/"},
	{"1M msg/s point to point", "TBMQ", "5 broker nodes, 11 Redis nodes, 5 Kafka brokers",
		"1M msg/s between persistent sessions, QoS 1, 62 B (about 8,900 msg/s per CPU core)",
		"TBMQ's point-to-point test, as the issue quotes it"},
	{"10M devices, 1 msg/min", "Shoal's seed design", "20 nodes, what they include not stated",
		"10M clients, a projection, never measured", "the design Shoal started from"},
}
