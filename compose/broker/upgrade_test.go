package broker_test

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/config"
)

// TestDataDirOfEarlierRelease opens data directories written by earlier
// releases of `shoal all` (testdata/datadir-<commit>.tgz, made by
// testdata/make-datadir.sh with that release's binary) and checks that
// this code serves what they hold: the persistent session is present with
// its subscription and its two queued QoS 1 messages, and each tenant
// sees its own retained message only. The fixtures' topics have 2
// partitions: each is opened with kafka.partitions 2 and with it unset,
// when a new data directory would get more (kafka.EmbeddedPartitions) and
// this one keeps its 2 (kafka.Config.AdoptPartitions).
func TestDataDirOfEarlierRelease(t *testing.T) {
	fixtures, err := filepath.Glob("testdata/datadir-*.tgz")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no data directory fixtures: %v", err)
	}
	for _, fx := range fixtures {
		for _, partitions := range []int32{2, 0} {
			name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(fx), "datadir-"), ".tgz")
			name += map[int32]string{2: "/partitions-2", 0: "/partitions-unset"}[partitions]
			t.Run(name, func(t *testing.T) { testDataDirOfEarlierRelease(t, fx, partitions) })
		}
	}
}

func testDataDirOfEarlierRelease(t *testing.T, fx string, partitions int32) {
	dir := t.TempDir()
	untar(t, fx, dir)
	b := startBroker(t, func(c *config.Config) {
		c.DataDir = filepath.Join(dir, "data")
		c.Kafka.Partitions = partitions
		c.Gateway.WSListen = ""
	})
	never := uint32(0xFFFFFFFF)
	sub, ca := dialV5(t, mqttAddr(b), "acme-sub", func(cp *paho.Connect) {
		cp.CleanStart = false
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &never}
	})
	if !ca.SessionPresent {
		t.Fatal("the persistent session written by the earlier release is not present")
	}
	var got []string
	for range 2 {
		got = append(got, string(sub.expect(t).Payload))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"queued-1", "queued-2"}) {
		t.Fatalf("queued messages %q, want queued-1 and queued-2", got)
	}
	// The subscription itself survived.
	pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
	pub.publish(t, &paho.Publish{Topic: "fleet/d3/temp", QoS: 1, Payload: []byte("after-upgrade")})
	if m := sub.expect(t); string(m.Payload) != "after-upgrade" {
		t.Fatalf("after the upgrade the subscription got %q", m.Payload)
	}
	// Retained messages, each tenant its own.
	for _, tc := range []struct{ client, want string }{{"acme-reader", "retained-acme"}, {"other-reader", "retained-other"}} {
		r, _ := dialV5(t, mqttAddr(b), tc.client)
		r.subscribe(t, pahoSub("fleet/+/status", 1))
		if m := r.expect(t); string(m.Payload) != tc.want {
			t.Fatalf("%s: retained %q, want %q", tc.client, m.Payload, tc.want)
		}
		r.expectNone(t, 200*time.Millisecond)
	}
}

// untar extracts the gzipped tar archive at path into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("archive entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o750); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, io.LimitReader(tr, 64<<20)); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
