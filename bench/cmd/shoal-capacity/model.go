package main

import (
	"fmt"
	"math"
)

// The kinds of node the model counts, in the order of its tables.
var kinds = []string{"gateway", "router", "session", "kafka", "cassandra"}

// jvms are the kinds whose work a replication factor multiplies.
var jvms = map[string]bool{"kafka": true, "cassandra": true}

// params are the choices a user makes, not measurements: the node size,
// how full a node may run, and the replication of the log and the
// database.
type params struct {
	VCPU   float64 // cores of a node
	MemGiB float64 // memory of a node
	// CPUTarget and MemTarget are the share of a node's cores and memory
	// the steady load may take; the rest is for bursts, connect storms and
	// a failed peer's share.
	CPUTarget, MemTarget float64
	// RF is the replication factor of the Kafka topics and the keyspace.
	RF int
	// MinPartitions is the partitions of each event topic at the least
	// (kafka.partitions' default).
	MinPartitions int
	// MinShoal is the least number of nodes of each Shoal role: one may
	// fail and the others carry on.
	MinShoal int
	// WriteMBs is the log a Kafka node may write, MB/s, its replicas'
	// share included: what its disks and network take.
	WriteMBs float64
	// Retention is how long the log is kept (kafka.retention), hours.
	Retention float64
}

// defaultParams are the flags' defaults (docs/capacity.md states them).
var defaultParams = params{VCPU: 16, MemGiB: 64, CPUTarget: 0.6, MemTarget: 0.7, RF: 3, MinPartitions: 16, MinShoal: 2, WriteMBs: 500, Retention: 168}

// workload is a fleet to size.
type workload struct {
	Name    string
	Devices float64 // connections held, each with one subscription
	Rate    float64 // messages published per second, all devices together
	Payload int     // bytes
	// Phase is the units phase whose cost per message applies:
	// point-to-point between clean sessions (pairs-qos1), to persistent
	// sessions (pairs-qos1-persistent), or a fan-out (fanout-1000-qos0).
	Phase string
	// Fanout is the deliveries of each message (fan-out only).
	Fanout float64
	// Persistent: each device holds a persistent session.
	Persistent bool
}

// sizing is what a workload takes.
type sizing struct {
	W          workload
	Deliveries float64            // per second
	Cores      map[string]float64 // by kind, in use at the steady load
	MemBytes   map[string]float64 // by kind (Shoal roles only)
	Nodes      map[string]int
	Bound      map[string]string // "cpu", "memory" or "min"
	Partitions int
	Heartbeats float64 // records/s
	LogBytes   float64 // bytes/s written by Kafka's brokers, replicas included
	// FanoutS is how long the gateways' cores take to write one message
	// to every subscriber (fan-out only).
	FanoutS float64
	// ResumeS is how long the devices of one failed gateway take to
	// resume on the others with the cluster's spare cores; FleetResumeS
	// the same for every device at once.
	ResumeS, FleetResumeS float64
	// Presence is the memory every router holds for the devices'
	// presence; RouterGiB, when the presence leaves no room in a node,
	// the memory a router node needs instead.
	Presence  float64
	RouterGiB float64
}

// costs are the unit costs the model takes from the measured files.
type costs struct {
	perMessage   map[string]map[string]float64 // phase → kind → CPU-µs
	perDelivery  map[string]float64            // fan-out, kind → CPU-µs
	bytes        map[string]float64            // phase → Kafka bytes per message
	payload      map[string]int                // phase → payload measured with
	payloadRecs  map[string]float64            // phase → records carrying the payload
	fanoutBytes  float64                       // Kafka bytes per fan-out delivery
	kafkaPerByte float64                       // Kafka CPU-µs per byte of log (pairs-qos1)
	resume       map[string]float64            // kind → CPU-µs per resumed connect
	heartbeat    map[string]float64            // kind → CPU-µs per heartbeat record
	connMem      map[string]float64            // kind → bytes per held device
	// presence is the router memory per device that every router holds:
	// each reads all of shoal.presence.
	presence float64
	subMem   map[string]float64 // kind → bytes per subscription
	idle     map[string]float64 // kind → CPU-µs per device-second held
}

// payloadRecords are the records of a phase's message that carry its
// payload (events.proto): the Publish in shoal.messages, the Delivery in
// shoal.deliveries and, to a persistent session, the InboxAppend in
// shoal.sessions (its InboxAck does not).
var payloadRecords = map[string]float64{phaseQoS1: 2, phasePersistent: 3}

func unitCosts(in *inputs) (*costs, error) {
	c := &costs{perMessage: map[string]map[string]float64{}, bytes: map[string]float64{}, payload: map[string]int{},
		payloadRecs: payloadRecords, resume: map[string]float64{}, heartbeat: map[string]float64{},
		connMem: map[string]float64{}, subMem: map[string]float64{}, idle: map[string]float64{}}
	for _, name := range []string{phaseQoS1, phasePersistent} {
		p, err := in.phase(name)
		if err != nil {
			return nil, err
		}
		c.perMessage[name], c.bytes[name], c.payload[name] = nonNegative(p.CPU), p.KafkaBytes, p.Payload
	}
	q1 := in.units.Units[indexOf(in, phaseQoS1)]
	c.kafkaPerByte = q1.CPU["kafka"] / q1.KafkaBytes
	f, err := in.phase(phaseFanout)
	if err != nil {
		return nil, err
	}
	c.perDelivery = nonNegative(f.CPUDelivery)
	fanoutSubscribers := 1000.0 // the phase's name says its fan-out
	c.fanoutBytes = f.KafkaBytes / fanoutSubscribers
	// The fan-out phase's Kafka CPU is within the broker's idle noise at
	// 20 messages/s: it is taken from the bytes the deliveries add.
	c.perDelivery["kafka"] = c.fanoutBytes * c.kafkaPerByte
	n := 0
	for _, s := range in.storm.Storms {
		if s.Wave != "resume" || s.Failed > 0 {
			continue
		}
		n++
		for k, v := range s.CPU {
			c.resume[k] += v
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no resume wave without failures", stormPath)
	}
	for k := range c.resume {
		c.resume[k] /= float64(n)
	}
	c.heartbeat = nonNegative(in.ticks.PerRecord)
	c.subMem = subscriptionMemory(in)
	if h := in.hold; h != nil {
		for _, k := range []string{"gateway", "router", "session"} {
			c.connMem[k] = math.Max(h.RSS[k], 0)
		}
		// Both ends of every loopback connection are in the one kernel:
		// the broker's side is half.
		c.connMem["gateway"] += h.KernelTCP / 2
		c.idle = nonNegative(h.IdleCPU)
		// A held device's one subscription is in its RSS. The router's is
		// split: the subscription is held by the router owning its
		// partition, the presence by every router; the presence is what
		// the held device costs the router beyond its subscription.
		sub := c.subMem["router"]
		c.presence = math.Max(c.connMem["router"]-sub, 0)
		c.connMem["router"] = 0
		for k := range c.subMem {
			if k != "router" {
				c.subMem[k] = 0
			}
		}
	} else {
		// Without the hold, a gateway's memory per idle connection from
		// the units' connect phases, their largest.
		for _, p := range in.units.Units {
			c.connMem["gateway"] = math.Max(c.connMem["gateway"], p.GatewayRSS)
		}
	}
	return c, nil
}

// subscriptionMemory is each role's RSS growth per concrete subscription
// (units' subscribe-concrete, rss_bytes).
func subscriptionMemory(in *inputs) map[string]float64 {
	out := map[string]float64{}
	var raw map[string]float64
	for _, p := range in.units.Units {
		if p.Name == phaseConcrete {
			raw = p.RSSBytes
		}
	}
	for _, k := range []string{"gateway", "router", "session"} {
		out[k] = math.Max(raw[k], 0)
	}
	return out
}

func indexOf(in *inputs, name string) int {
	for i, p := range in.units.Units {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// nonNegative copies m with negative figures (idle noise larger than the
// work) as 0.
func nonNegative(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = math.Max(v, 0)
	}
	return out
}

// size sizes w with c under p.
func size(w workload, c *costs, p params) sizing {
	s := sizing{W: w, Cores: map[string]float64{}, MemBytes: map[string]float64{}, Nodes: map[string]int{}, Bound: map[string]string{}}
	msgCores := map[string]float64{}
	var logBytes float64
	if w.Phase == phaseFanout {
		s.Deliveries = w.Rate * w.Fanout
		for _, k := range kinds {
			msgCores[k] = s.Deliveries * c.perDelivery[k] / 1e6
		}
		logBytes = s.Deliveries * c.fanoutBytes
	} else {
		s.Deliveries = w.Rate
		for _, k := range kinds {
			msgCores[k] = w.Rate * c.perMessage[w.Phase][k] / 1e6
		}
		extra := float64(w.Payload-c.payload[w.Phase]) * c.payloadRecs[w.Phase]
		logBytes = w.Rate * (c.bytes[w.Phase] + extra)
	}
	s.LogBytes = logBytes * float64(p.RF)
	s.Partitions = p.MinPartitions
	// The heartbeats depend on the gateways and the partitions, which
	// depend on the load: a few rounds settle them.
	for range 8 {
		gateways := s.Nodes["gateway"]
		s.Heartbeats = float64(s.Nodes["gateway"]*s.Partitions) + float64(s.Partitions)/5
		for _, k := range kinds {
			cores := msgCores[k] + w.Devices*c.idle[k]/1e6 + s.Heartbeats*c.heartbeat[k]/1e6
			if jvms[k] {
				cores *= float64(p.RF)
			}
			s.Cores[k] = cores
			s.MemBytes[k] = w.Devices * (c.connMem[k] + c.subMem[k])
			s.Nodes[k], s.Bound[k] = nodes(cores, s.MemBytes[k], k, p)
		}
		s.routerMemory(w, c, p)
		if byWrite := int(math.Ceil(s.LogBytes / (p.WriteMBs * 1e6))); byWrite > s.Nodes["kafka"] {
			s.Nodes["kafka"], s.Bound["kafka"] = byWrite, "write"
		}
		// One shard per partition applies its records in order, on one
		// core at most: the router's and session service's cores need as
		// many partitions, and each gateway a slot of shoal.deliveries.
		need := max(p.MinPartitions, s.Nodes["gateway"], int(math.Ceil(s.Cores["router"])), int(math.Ceil(s.Cores["session"])))
		if need == s.Partitions && gateways == s.Nodes["gateway"] {
			break
		}
		s.Partitions = need
	}
	s.ResumeS, s.FleetResumeS = resumeTimes(s, c, p)
	if w.Phase == phaseFanout {
		s.FanoutS = w.Fanout * c.perDelivery["gateway"] / 1e6 / (float64(s.Nodes["gateway"]) * p.VCPU)
	}
	return s
}

// routerMemory counts the routers again with the presence every one of
// them holds: each node has what the presence leaves for its share of the
// subscriptions.
func (s *sizing) routerMemory(w workload, c *costs, p params) {
	s.Presence = w.Devices * c.presence
	s.RouterGiB = 0
	if s.Presence == 0 {
		return
	}
	node := p.MemGiB * (1 << 30) * p.MemTarget
	split := s.MemBytes["router"]
	if room := node - s.Presence; room > 0 {
		if n := int(math.Ceil(split / room)); n > s.Nodes["router"] {
			s.Nodes["router"], s.Bound["router"] = n, "memory"
		}
		return
	}
	s.Bound["router"] = "presence"
	s.RouterGiB = (s.Presence + split/float64(s.Nodes["router"])) / p.MemTarget / (1 << 30)
}

// nodes is the nodes of kind k that cores and mem take under p, and what
// bounds them.
func nodes(cores, mem float64, k string, p params) (int, string) {
	byCPU := int(math.Ceil(cores / (p.VCPU * p.CPUTarget)))
	byMem := int(math.Ceil(mem / (p.MemGiB * (1 << 30) * p.MemTarget)))
	least := p.MinShoal
	if jvms[k] {
		least = p.RF // a replica on each of RF nodes
	}
	switch {
	case byCPU >= byMem && byCPU >= least:
		return byCPU, "cpu"
	case byMem > byCPU && byMem >= least:
		return byMem, "memory"
	}
	return least, "min"
}

// resumeTimes is how long the devices of one gateway, and every device,
// take to resume their sessions (connect-storm's resume wave) with the
// cores the steady load leaves free, by the kind that runs out first.
func resumeTimes(s sizing, c *costs, p params) (one, all float64) {
	rate := math.Inf(1)
	for _, k := range kinds {
		cost := c.resume[k]
		if jvms[k] {
			cost *= float64(p.RF)
		}
		spare := float64(s.Nodes[k])*p.VCPU - s.Cores[k]
		if cost <= 0 || spare <= 0 {
			continue
		}
		rate = math.Min(rate, spare*1e6/cost)
	}
	if math.IsInf(rate, 1) || s.W.Devices == 0 {
		return 0, 0
	}
	return s.W.Devices / float64(s.Nodes["gateway"]) / rate, s.W.Devices / rate
}
