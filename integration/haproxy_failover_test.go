//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// haSubscribers is how many persistent subscribers the failure tests keep
// on pool a (leastconn spreads them over both gateways).
const haSubscribers = 10

// TestHAProxyFailover: kill -9 one gateway of a pool under a QoS 1 stream
// through HAProxy to persistent subscribers spread over the pool. Each of
// the killed gateway's subscribers reconnects through HAProxy at once,
// lands on the pool's other gateway, resumes its session, and receives
// every acknowledged message (repeats only with DUP). The failover times
// (kill to each resumed session's CONNACK) are logged.
func TestHAProxyFailover(t *testing.T) {
	a1, a2, h := startPoolA(t)
	const n, topic = 300, "f/x"
	rc := keepConnected(t, h.mqtt, "acme-f-sub", haSubscribers, topic)
	victim, other := a1, a2
	if a2.gauge(t, "shoal_gateway_connections") > a1.gauge(t, "shoal_gateway_connections") {
		victim, other = a2, a1
	}
	held := victim.gauge(t, "shoal_gateway_connections")
	if held < 1 {
		t.Fatalf("no subscriber on either gateway of pool a: %v, %v",
			a1.gauge(t, "shoal_gateway_connections"), a2.gauge(t, "shoal_gateway_connections"))
	}
	stream(t, h.mqtt, "acme-f-pub", topic, n, func(i int) {
		if i == n/3 {
			rc.mark()
			victim.kill()
			t.Logf("%s killed under the stream, holding %v of %d subscribers", victim.name, held, haSubscribers)
		}
	})
	took := rc.finish()
	if len(took) != int(held) {
		t.Errorf("%d subscribers reconnected, want the %v the killed gateway held", len(took), held)
	}
	rc.check("gateway killed, subscribers failed over through HAProxy", n)
	if got := other.gauge(t, "shoal_gateway_connections"); got < haSubscribers {
		t.Errorf("%s holds %v connections after the failover, want all %d subscribers", other.name, got, haSubscribers)
	}
	t.Logf("failover: kill -9 to each resumed session's CONNACK: %s", quantiles(took))
}

// TestHAProxyRollingRestart: every gateway of a pool restarted one after
// the other (SIGTERM, wait until it is ready, next) under a QoS 1 stream
// through HAProxy to persistent subscribers spread over the pool. The
// subscribers a stopping gateway tells 0x8B reconnect through HAProxy at
// once and resume on the other; nothing acknowledged is lost. The
// reconnect times and the repeats are logged.
func TestHAProxyRollingRestart(t *testing.T) {
	a1, a2, h := startPoolA(t)
	const n, topic = 400, "r/x"
	rc := keepConnected(t, h.mqtt, "acme-r-sub", haSubscribers, topic)
	restart := func(g *proc) {
		rc.mark()
		g.signal(syscall.SIGTERM)
		<-g.done
		g.restart()
		t.Logf("%s stopped and ready again in %v", g.name, rc.sinceMark().Round(time.Millisecond))
	}
	stream(t, h.mqtt, "acme-r-pub", topic, n, func(i int) {
		switch i {
		case n / 4:
			restart(a1)
		case n / 2:
			restart(a2)
		}
	})
	took := rc.finish()
	// Every subscriber was on a restarted gateway at least once: those of
	// a1 moved to a2, and all of them from a2 to a1.
	if len(took) < haSubscribers {
		t.Errorf("%d reconnections, want at least one for each of the %d subscribers", len(took), haSubscribers)
	}
	rc.check("rolling restart of pool a", n)
	t.Logf("rolling restart: %d reconnections, from the SIGTERM to the resumed session's CONNACK: %s", len(took), quantiles(took))
}

// reconnector keeps persistent subscribers connected as devices do: one
// whose connection ends (a DISCONNECT from a stopping gateway, or a
// close) reconnects at once with its session, through the same address,
// again every 100 ms until it is accepted (at most clusterWait).
type reconnector struct {
	t     *testing.T
	addr  string
	topic string
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	marked time.Time
	lives  [][]*mqttClient // each subscriber's connections, oldest first
	took   []time.Duration // mark to each reconnection's CONNACK
	errs   []error
}

// keepConnected connects n persistent subscribers (prefix00, prefix01, …)
// to addr, subscribes each to topic with QoS 1, and keeps them connected
// until finish.
func keepConnected(t *testing.T, addr, prefix string, n int, topic string) *reconnector {
	t.Helper()
	r := &reconnector{t: t, addr: addr, topic: topic, stop: make(chan struct{}), lives: make([][]*mqttClient, n)}
	for i := range n {
		sub, _ := dialMQTT(t, addr, fmt.Sprintf("%s%02d", prefix, i), true, 3600)
		sub.subscribe(topic, 1)
		r.lives[i] = []*mqttClient{sub}
		r.wg.Go(func() { r.follow(i, sub) })
	}
	t.Cleanup(func() { r.stopFollowing() })
	return r
}

// follow reconnects subscriber i each time its connection ends, until
// stop.
func (r *reconnector) follow(i int, cur *mqttClient) {
	for {
		select {
		case <-cur.Done():
		case <-r.stop:
			return
		}
		noticed := time.Now()
		for {
			next, _, err := tryDialMQTT(r.t, r.addr, cur.id, false, 3600, "", "")
			if err == nil {
				r.mu.Lock()
				r.lives[i] = append(r.lives[i], next)
				r.took = append(r.took, time.Since(r.marked))
				r.mu.Unlock()
				cur = next
				break
			}
			if r.t.Context().Err() != nil {
				return // the test ended
			}
			if time.Since(noticed) > clusterWait {
				r.mu.Lock()
				r.errs = append(r.errs, fmt.Errorf("%s: no reconnection in %v: %w", cur.id, clusterWait, err))
				r.mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond) // paced as a device reconnects; a goroutine, so not eventually
		}
	}
}

// mark notes the moment a gateway is made to fail: reconnection times
// count from it.
func (r *reconnector) mark() {
	r.mu.Lock()
	r.marked = time.Now()
	r.mu.Unlock()
}

// sinceMark is the time since mark.
func (r *reconnector) sinceMark() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.marked)
}

func (r *reconnector) stopFollowing() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

// finish waits a second for connections that just ended to come back,
// stops following, fails on a subscriber that could not reconnect, and
// returns the reconnection times.
func (r *reconnector) finish() []time.Duration {
	r.t.Helper()
	time.Sleep(time.Second) // a grace period: nothing tells that no connection is still coming back
	r.stopFollowing()
	for _, err := range r.errs {
		r.t.Error(err)
	}
	return r.took
}

// check fails unless every subscriber received all n messages of the
// stream across its connections, repeats only with DUP.
func (r *reconnector) check(what string, n int) {
	r.t.Helper()
	repeats := 0
	for _, lives := range r.lives {
		known := map[string]bool{}
		for _, old := range lives[:len(lives)-1] {
			// Its connection ended: what it received is in its channel.
			for len(old.msgs) > 0 {
				if m := <-old.msgs; m.Topic == r.topic {
					known[string(m.Payload)] = true
				}
			}
		}
		last := lives[len(lives)-1]
		tl := last.collectMore(r.topic, n, known)
		tl.check(r.t, fmt.Sprintf("%s, %s (%d connections)", what, last.id, len(lives)), n)
		repeats += tl.repeats
	}
	r.t.Logf("%s: %d subscribers received all %d messages; %d repeats, all with DUP", what, len(r.lives), n, repeats)
}

// connectAddress reads shoal.sessions from the start until the Connect
// event of client id, and returns its client address.
// checkLanded checks that the client id, connected (how) from the local
// address own, is held by gateway gw, which counted before connections
// until then, and that its Connect event carries own, the address HAProxy
// passed on with PROXY v2.
func checkLanded(t *testing.T, c *cluster, gw *proc, id, how string, before float64, own string) {
	t.Helper()
	if after := gw.gauge(t, "shoal_gateway_connections_total"); after != before+1 {
		t.Errorf("%s (%s): %s counted %v connections, %v before; want it to hold the client", id, how, gw.name, after, before)
	}
	if got := connectAddress(t, c, id); got != own {
		t.Errorf("%s (%s): the Connect event says the client is at %q; it is at %q", id, how, got, own)
	}
}

func connectAddress(t *testing.T, c *cluster, id string) string {
	t.Helper()
	kc := newKafkaClient(t, c.kafka, kafka.Config{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	var addr string
	found := errors.New("found")
	err := kc.Consume(ctx, kafka.ConsumeConfig{Topic: kafka.TopicSessions, Partitions: []int32{0, 1, 2, 3}}, func(_ context.Context, b kafka.Batch) error {
		for _, r := range b.Records {
			var env eventspb.Envelope
			if kafka.DecodeEnvelope(r, &env) != nil {
				continue
			}
			if cn := env.GetConnect(); cn != nil && env.ClientId == id {
				addr = cn.GetClientAddress()
				return found
			}
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("no Connect event of %s in %s: %v", id, kafka.TopicSessions, err)
	}
	return addr
}

// startPoolA starts a distributed cluster with pool a of two gateways and
// a default pool of one, every gateway requiring PROXY v2, behind HAProxy.
func startPoolA(t *testing.T) (a1, a2 *proc, h *haproxyProc) {
	t.Helper()
	c := newCluster(t)
	sess, r := c.start("session", "session"), c.start("router", "router")
	pp := []string{"--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8"}
	a1, a2 = c.startGateway("gw-a1", pp...), c.startGateway("gw-a2", pp...)
	d := c.startGateway("gw-d", pp...)
	for _, p := range []*proc{sess, r, a1, a2, d} {
		p.waitReady()
	}
	return a1, a2, startHAProxy(t, "default="+d.server(), "a="+a1.server()+","+a2.server())
}
