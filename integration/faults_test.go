//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// faultRounds is how many times each fault runs: SHOAL_FAULT_ROUNDS
// (make chaos sets 3), else once (make test).
func faultRounds(t *testing.T) int {
	v := os.Getenv("SHOAL_FAULT_ROUNDS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SHOAL_FAULT_ROUNDS=%q: want a count ≥ 1", v)
	}
	return n
}

// faultKafkaNodes is the size of the fault tests' Kafka: a quorum that
// survives the loss of one node, topics replicated 3 times with
// min.insync.replicas 2.
const faultKafkaNodes = 3

// faultCQLNodes is the size of the fault tests' Cassandra ring: the
// keyspace has 3 replicas, read and written at QUORUM, so one node may be
// down.
const faultCQLNodes = 3

// startKafkaNodes starts a Kafka of faultKafkaNodes nodes for t, each
// node's log in t's directory (its warnings logged when t fails).
func startKafkaNodes(t *testing.T) *realkafka.Nodes {
	t.Helper()
	skipWithContainers(t)
	dir := t.TempDir()
	logs := make([]*os.File, faultKafkaNodes)
	for i := range logs {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("kafka-%d.log", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		logKafkaWarningsOnFailure(t, f.Name())
		logs[i] = f
	}
	ctx, cancel := context.WithTimeout(t.Context(), kafkaStartTimeout)
	defer cancel()
	began := time.Now()
	m, err := realkafka.StartNodes(ctx, filepath.Join(dir, "cluster"), faultKafkaNodes, func(i int) io.Writer { return logs[i] }, realkafka.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stop kafka: %v", err)
		}
	})
	t.Logf("kafka of %d nodes started on %v in %s", faultKafkaNodes, m.Brokers(), time.Since(began).Round(time.Millisecond))
	return m
}

// TestFaults runs Shoal's roles on a cluster shaped like production (a
// Kafka of 3 nodes, topics replicated 3 times, min.insync.replicas 2) and
// injects one fault per subtest under a load of numbered QoS 1 and QoS 2
// messages through HAProxy: nothing acknowledged may be lost, nothing
// delivered twice at QoS 2. The figures (the longest pause in deliveries,
// QoS 1 repeats, acknowledgement latency) are logged for docs/faults.md.
func TestFaults(t *testing.T) {
	began := time.Now()
	// On a Cassandra ring of 3 the keyspace has 3 replicas and the
	// Cassandra faults run; with SHOAL_FAULT_RING=0 the roles share the
	// suite's one node instead, and they are skipped.
	if !faultRing(t) {
		runFaults(t, began, startKafkaNodes(t), nil)
		return
	}
	ringDone := beginCQLRing(t, faultCQLNodes) // starts beside Kafka
	kn := startKafkaNodes(t)
	runFaults(t, began, kn, ringDone())
}

// faultRing says whether the fault suite runs on a Cassandra ring of
// faultCQLNodes: yes unless SHOAL_FAULT_RING=0. The ring, and the
// CassandraNodeKill it brings, cost make test about 4 minutes (three JVMs
// on the loaded 2-core machine; a killed node takes 75 s to start again).
func faultRing(t *testing.T) bool {
	switch v := os.Getenv("SHOAL_FAULT_RING"); v {
	case "", "1":
		return true
	case "0":
		return false
	default:
		t.Fatalf("SHOAL_FAULT_RING=%q: want 0 (one Cassandra node) or 1 (a ring of %d, the default)", v, faultCQLNodes)
		return false
	}
}

// faultSchedule says whether the whole schedule runs: SHOAL_FAULT_SCHEDULE
// set (make chaos sets it). Without it (make test) the faults that take
// minutes each are skipped, since a shorter one of their kind runs.
func faultSchedule() bool { return os.Getenv("SHOAL_FAULT_SCHEDULE") != "" }

// runFaults is TestFaults on the Kafka nodes kn and the Cassandra ring
// (nil: the suite's shared node).
func runFaults(t *testing.T, began time.Time, kn *realkafka.Nodes, ring *realcql.Ring) {
	var cqlHosts []string
	if ring != nil {
		cqlHosts = ring.Hosts()
	}
	c := newClusterOn(t, kn, "  replication_factor: 3\n  request_timeout: 3s\n", cqlHosts)
	// The production lease: a gateway must ride out the seconds a
	// database stalls when one of its nodes dies (CassandraNodeKill).
	c.editConfig("  slot_lease: 6s\n", "  slot_lease: 15s\n")
	// And the production timeout for a silent gateway: the other suites'
	// 4 s ended every connection of a gateway whose heartbeats a frozen
	// Kafka broker held up for that long (KafkaBrokerPause), a false
	// death that cost its clients a reconnect and a redelivery.
	c.editConfig("  gateway_timeout: 4s\n", "  gateway_timeout: 10s\n")
	// SHOAL_FAULT_LOG_LEVEL=debug logs franz-go's requests too: what a
	// client sent to a frozen broker and when it gave up on it.
	if lvl := os.Getenv("SHOAL_FAULT_LOG_LEVEL"); lvl != "" {
		c.editConfig("log_level: info\n", "log_level: "+lvl+"\n")
	}

	// A fresh cluster's topics reach its brokers one by one: every start
	// of a role that creates them must ride that out, never exit.
	t.Run("FreshTopicsStart", func(t *testing.T) {
		for i := range 3 {
			s := c.start("session", fmt.Sprintf("session-fresh-%d", i))
			s.waitReady()
			s.kill()
			deleteShoalTopics(t, kn.Brokers())
		}
	})

	sessions := []*proc{c.start("session", "session-1"), c.start("session", "session-2")}
	routers := []*proc{c.start("router", "router-1"), c.start("router", "router-2")}
	pp := []string{"--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8"}
	// The fourth gateway runs in a network namespace of its own, whose
	// link to Kafka GatewayPartition cuts (netns_test.go); HAProxy reaches
	// it from the host's end of the veth.
	ns := newNetNamespace(t, "gw4")
	gws := []*proc{c.startGateway("gw-1", pp...), c.startGateway("gw-2", pp...), c.startGateway("gw-3", pp...),
		c.startGatewayIn(ns, "gw-4", "--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8,"+ns.hostAddr+"/32")}
	for _, p := range slices.Concat(sessions, routers, gws) {
		p.waitReady()
	}
	servers := make([]string, len(gws))
	for i, g := range gws {
		servers[i] = g.server()
	}
	h := startHAProxy(t, "default="+strings.Join(servers, ","))
	t.Logf("cluster of %d Kafka nodes, %d Cassandra nodes, %d session services, %d routers, %d gateways behind HAProxy ready in %s",
		faultKafkaNodes, len(c.cqlHosts), len(sessions), len(routers), len(gws), time.Since(began).Round(time.Millisecond))

	// load runs fault under loadOnce's workload, faultRounds times.
	rounds := faultRounds(t)
	load := func(t *testing.T, name string, fault func(t *testing.T)) {
		t.Helper()
		for r := range rounds {
			n := name
			if rounds > 1 {
				n = fmt.Sprintf("%s%d", name, r+1)
				t.Logf("%s: round %d of %d", name, r+1, rounds)
			}
			loadOnce(t, c, h.mqtt, n, fault)
			// No process may die of a fault: the ones it stops are
			// started again (or replaced) within it.
			for _, p := range slices.Concat(sessions, routers, gws) {
				select {
				case <-p.done:
					t.Errorf("%s: %s exited during the fault: %v", n, p.name, p.waitErr)
				default:
				}
			}
		}
	}

	t.Run("KafkaLeaderKill", func(t *testing.T) {
		load(t, "KafkaLeaderKill", func(t *testing.T) {
			node := kn.NodeByID(busiestLeader(t, kn.Brokers(), "shoal.messages", "shoal.deliveries"))
			controller := activeController(t, kn.Brokers())
			killed := time.Now()
			if err := node.Kill(); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed kafka node %d, the leader of the most shoal.messages and shoal.deliveries partitions; the active controller: node %d", node.ID(), controller)
			time.Sleep(10 * time.Second) // real time: the cluster runs on two nodes meanwhile
			ctx, cancel := context.WithTimeout(t.Context(), kafkaStartTimeout)
			defer cancel()
			if err := node.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("kafka node %d back after %s", node.ID(), time.Since(killed).Round(time.Millisecond))
		})
	})

	t.Run("KafkaBrokerPause", func(t *testing.T) {
		load(t, "KafkaBrokerPause", func(t *testing.T) {
			node := kn.NodeByID(busiestLeader(t, kn.Brokers(), "shoal.messages", "shoal.deliveries"))
			controller := activeController(t, kn.Brokers())
			if err := node.Pause(); err != nil {
				t.Fatal(err)
			}
			// Longer than the broker's session with the quorum (2 s
			// here), so the controller fences it and moves its leaders.
			t.Logf("paused kafka node %d (SIGSTOP) for 10 s; the active controller: node %d", node.ID(), controller)
			time.Sleep(10 * time.Second) // real time: the zombie's absence is the fault
			if err := node.Resume(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), kafkaStartTimeout)
			defer cancel()
			eventually.Before(t, ctx, fmt.Sprintf("kafka node %d to register again", node.ID()), func() bool {
				return isLiveBroker(ctx, kn.Brokers(), node.ID())
			})
		})
	})

	// A Cassandra node is killed (SIGKILL) and started again 10 s later:
	// QUORUM reads and writes and the leases' lightweight transactions
	// go on with two replicas of three.
	t.Run("CassandraNodeKill", func(t *testing.T) {
		if ring == nil {
			t.Skip("runs on a Cassandra ring only: SHOAL_FAULT_RING=0 put the suite on one node")
		}
		load(t, "CassandraNodeKill", func(t *testing.T) {
			node := ring.Node(1)
			killed := time.Now()
			if err := node.Kill(); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed cassandra node %s", node.Addr())
			time.Sleep(10 * time.Second) // real time: the ring runs on two nodes meanwhile
			ctx, cancel := context.WithTimeout(t.Context(), cqlStartTimeout)
			defer cancel()
			if err := node.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("cassandra node %s back after %s", node.Addr(), time.Since(killed).Round(time.Millisecond))
		})
	})

	// Every Cassandra node is stopped (SIGTERM: it drains) and started
	// again, one at a time, as an upgrade of the database does (a node
	// takes 70–90 s to start on the loaded 2-core machine). Without the
	// ring, TestCassandraRing stops and restarts a ring node, unloaded.
	t.Run("CassandraRollingRestart", func(t *testing.T) {
		if ring == nil {
			t.Skip("runs on a Cassandra ring only: SHOAL_FAULT_RING=0 put the suite on one node")
		}
		if !faultSchedule() {
			t.Skip("the whole schedule only (make chaos, SHOAL_FAULT_SCHEDULE=1): three node restarts take about 4 minutes under the load; CassandraNodeKill is the shorter fault of its kind")
		}
		load(t, "CassandraRollingRestart", func(t *testing.T) {
			for i := range ring.Len() {
				node := ring.Node(i)
				began := time.Now()
				if err := node.Stop(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), cqlStartTimeout)
				err := node.Restart(ctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("cassandra node %s stopped and back in %s", node.Addr(), time.Since(began).Round(time.Millisecond))
				time.Sleep(2 * time.Second) // real time: a steady load between two restarts
			}
		})
	})

	// Routers and session services join and leave consumer groups under
	// load: one of each added, then one of each stopped (SIGTERM: it
	// leaves its groups at once), then one of each killed (its partitions
	// wait for the group session timeout, 6 s here, before they move).
	t.Run("RouterAddRemove", func(t *testing.T) {
		// Every process added has a name of its own (router-3, router-4,
		// …): with several rounds, one added earlier still runs.
		spare := 2
		addPair := func() (*proc, *proc) {
			spare++
			return c.start("router", fmt.Sprintf("router-%d", spare)), c.start("session", fmt.Sprintf("session-%d", spare))
		}
		load(t, "RouterAddTerm", func(t *testing.T) {
			r, s := addPair()
			added := []*proc{r, s}
			for _, p := range added {
				p.waitReady()
			}
			t.Logf("added %s and %s", r.name, s.name)
			time.Sleep(3 * time.Second) // real time: the groups rebalance under load
			routers[0].stop(t)
			sessions[0].stop(t)
			t.Logf("stopped %s and %s (SIGTERM)", routers[0].name, sessions[0].name)
			routers[0], sessions[0] = added[0], added[1]
		})
		load(t, "RouterKill", func(t *testing.T) {
			routers[1].kill()
			sessions[1].kill()
			t.Logf("killed %s and %s (SIGKILL)", routers[1].name, sessions[1].name)
			time.Sleep(8 * time.Second) // real time: past the group session timeout
			routers[1], sessions[1] = addPair()
			routers[1].waitReady()
			sessions[1].waitReady()
			t.Logf("added %s and %s", routers[1].name, sessions[1].name)
		})
	})

	// A gateway is killed (SIGKILL) and started again 5 s later: its
	// clients resume on the others through HAProxy, nothing it
	// acknowledged is lost, and the session services end its sessions
	// after session.gateway_timeout.
	t.Run("GatewayKill", func(t *testing.T) {
		load(t, "GatewayKill", func(t *testing.T) {
			g := gws[0]
			g.kill()
			t.Logf("killed %s (SIGKILL)", g.name)
			time.Sleep(5 * time.Second) // real time: the cluster runs without it meanwhile
			began := time.Now()
			g.restart()
			t.Logf("%s ready again %s after its restart", g.name, time.Since(began).Round(time.Millisecond))
		})
	})

	// One gateway is cut off from every Kafka broker for 30 s while
	// HAProxy, its clients and the database still reach it: it reports not
	// ready and moves its clients (0x9C) after gateway.kafka_timeout (10 s),
	// they resume elsewhere, and it serves again once the link heals.
	t.Run("GatewayPartition", func(t *testing.T) {
		gw4 := gws[3]
		ports := kafkaPorts(t, kn.Brokers())
		load(t, "GatewayPartition", func(t *testing.T) {
			before := strings.Count(procLog(t, gw4), "kafka unreachable: not ready")
			cutAt := time.Now()
			ns.cut(t, ports...)
			t.Logf("cut %s off from kafka %v", gw4.name, ports)
			eventually.True(t, clusterWait, gw4.name+" to report not ready", func() bool { return !answersReady(gw4) })
			t.Logf("%s not ready %s after the cut", gw4.name, time.Since(cutAt).Round(time.Millisecond))
			time.Sleep(30*time.Second - time.Since(cutAt)) // real time: the partition lasts 30 s
			ns.heal(t)
			healed := time.Now()
			eventually.True(t, clusterWait, gw4.name+" to be ready once healed", func() bool { return answersReady(gw4) })
			t.Logf("%s ready again %s after the heal", gw4.name, time.Since(healed).Round(time.Millisecond))
			lines := regexp.MustCompile(`kafka unreachable: not ready.* connections=(\d+)`).FindAllStringSubmatch(procLog(t, gw4), -1)
			if len(lines) <= before {
				t.Fatalf("%s did not log that it moved its clients", gw4.name)
			}
			t.Logf("%s moved %s connections to other gateways", gw4.name, lines[len(lines)-1][1])
			if lines[len(lines)-1][1] == "0" {
				t.Errorf("%s had no clients to move: the fault tested nothing of them", gw4.name)
			}
		})
	})

	// One gateway's clock is 30 s ahead of the cluster's: what it stamps
	// and compares stays right (faults_clock_test.go).
	t.Run("ClockSkew", func(t *testing.T) {
		load(t, "ClockSkew", func(t *testing.T) { testClockSkew(t, c, h.mqtt, gws[2]) })
	})

	// Every Shoal process is stopped (SIGTERM) and started again, one at a
	// time, as an upgrade does: the clients of a gateway reconnect through
	// HAProxy to another one.
	t.Run("RollingRestart", func(t *testing.T) {
		load(t, "RollingRestart", func(t *testing.T) {
			for _, p := range slices.Concat(sessions, routers, gws) {
				began := time.Now()
				p.stop(t)
				p.restart()
				t.Logf("%s stopped and ready again in %s", p.name, time.Since(began).Round(time.Millisecond))
				time.Sleep(2 * time.Second) // real time: a steady load between two restarts
			}
		})
	})
}

// busiestLeader returns the node that leads the most partitions of the
// topics.
func busiestLeader(t *testing.T, brokers []string, topics ...string) int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	led := map[int32]int{}
	for _, d := range td {
		for _, p := range d.Partitions {
			led[p.Leader]++
		}
	}
	best, n := int32(-1), -1
	for id, k := range led {
		if k > n || (k == n && id < best) {
			best, n = id, k
		}
	}
	if best < 0 {
		t.Fatalf("no leader of %v", topics)
	}
	return best
}

// activeController returns the node that leads the KRaft quorum (the
// active controller), or -1 if no broker says. A fault on it costs a
// controller election before anything else moves.
func activeController(t *testing.T, brokers []string) int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Logf("describe the quorum: %v", err)
		return -1
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode == 0 {
				return p.LeaderID
			}
		}
	}
	return -1
}

// isLiveBroker says whether the cluster's metadata lists node id.
func isLiveBroker(ctx context.Context, brokers []string, id int32) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return false
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(mctx)
	return err == nil && slices.Contains(md.Brokers.NodeIDs(), id)
}

// deleteShoalTopics deletes every shoal.* topic and waits until they are
// gone, so that the next start creates them anew.
func deleteShoalTopics(t *testing.T, brokers []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range td.Names() {
		if strings.HasPrefix(n, "shoal.") {
			names = append(names, n)
		}
	}
	if _, err := adm.DeleteTopics(ctx, names...); err != nil {
		t.Fatal(err)
	}
	eventually.OK(t, clusterWait, func() string {
		td, err := adm.ListTopics(ctx, names...)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err.Error()
		}
		var left []string
		for _, d := range td {
			if d.Err == nil {
				left = append(left, d.Topic)
			}
		}
		if len(left) > 0 {
			return fmt.Sprintf("topics not yet deleted: %v", left)
		}
		return ""
	})
}

// loadOnce runs fault under a QoS 1 and a QoS 2 workload through addr (4
// publishers, up to 20 msg/s each, one publish in flight: MQTT orders a
// client's messages of a topic as it sent them, and with one in flight the
// order sent is the order numbered; 3 persistent subscribers each), and
// checks them: nothing acknowledged lost, nothing delivered twice at QoS 2.
func loadOnce(t *testing.T, c *cluster, addr, name string, fault func(t *testing.T)) {
	t.Helper()
	var ws []*workload
	for _, q := range []byte{1, 2} {
		ws = append(ws, startWorkload(t, workloadConfig{name: fmt.Sprintf("%s%d", strings.ToLower(name), q),
			addr: addr, pubs: 4, subs: 3, qos: q, interval: 50 * time.Millisecond, inflight: 1,
			topicRoot: fmt.Sprintf("faults/%s/q%d", name, q)}))
	}
	time.Sleep(3 * time.Second) // real time: a steady load before the fault
	for _, w := range ws {
		w.markFault()
	}
	fault(t)
	time.Sleep(5 * time.Second) // real time: a steady load after the recovery
	for i, w := range ws {
		r := w.stop()
		q := i + 1
		t.Logf("%s, QoS %d: %s", name, q, r)
		if r.lost > 0 {
			t.Errorf("%s, QoS %d: %d acknowledged messages lost", name, q, r.lost)
			explainLost(t, c, w, r)
		}
		if r.slowestLat > slowGoal {
			explainSlowest(t, c, w, r)
		}
		if q == 2 && r.repeats > 0 {
			t.Errorf("%s, QoS 2: %d messages delivered twice", name, r.repeats)
		}
		if r.acked == 0 {
			t.Errorf("%s, QoS %d: nothing was acknowledged", name, q)
		}
	}
}

// slowGoal is the longest a message sent during a fault should take to
// reach every subscriber (the goal of docs/faults.md: a pause of at most
// 3 s); a slower one is traced (explainSlowest).
const slowGoal = 3 * time.Second

// explainLost logs where the log has each message r lists as lost
// (explainMsg).
func explainLost(t *testing.T, c *cluster, w *workload, r faultReport) {
	t.Helper()
	for _, k := range r.lostMsgs {
		explainMsg(t, c, w, k)
	}
}

// explainSlowest logs when the slowest message sent since the fault began
// was sent, acknowledged and delivered, and its trace: the publish
// record's time is the gateway's, the delivery record's the router's, so
// the trace says on which hop it waited.
func explainSlowest(t *testing.T, c *cluster, w *workload, r faultReport) {
	t.Helper()
	t.Logf("slowest: %s: %s to its last subscriber", r.slowestWhat, r.slowestLat.Round(time.Millisecond))
	explainMsg(t, c, w, r.slowest)
}

// explainMsg logs where the log has message k (publisher, sequence): its
// record in shoal.messages (partition, offset, gateway, message id),
// found with `shoal replay`, and what `shoal trace` follows of it. A lost
// message with no record was acknowledged without being written; one with
// a record and no delivery was not routed.
func explainMsg(t *testing.T, c *cluster, w *workload, k [2]int) {
	t.Helper()
	want := payload(k[0], k[1])
	out, errOut, err := c.tool("replay", "--quiet", "--type", "publish", "--topic", w.topic(k[0]))
	if err != nil {
		t.Logf("explain %s: shoal replay: %v\n%s", want, err, errOut)
		return
	}
	var found []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			MessageID string `json:"message_id"`
			Payload   string `json:"payload"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Payload == want {
			found = append(found, e.MessageID)
			t.Logf("explain %s: in the log: %s", want, l)
		}
	}
	if len(found) == 0 {
		t.Logf("explain %s: not in shoal.messages (of %d publishes on %s)", want, strings.Count(out, "\n"), w.topic(k[0]))
	}
	for _, id := range found {
		out, errOut, err := c.tool("trace", id)
		t.Logf("explain %s: shoal trace %s: %v\n%s%s", want, id, err, out, errOut)
	}
}

// kafkaPorts returns the ports of brokers (host:port).
func kafkaPorts(t *testing.T, brokers []string) []int {
	t.Helper()
	var ports []int
	for _, b := range brokers {
		_, p, err := net.SplitHostPort(b)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, n)
	}
	return ports
}

// answersReady says whether p's /readyz answers 200.
func answersReady(p *proc) bool {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + p.http + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// procLog returns p's log.
func procLog(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
