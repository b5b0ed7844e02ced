package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shoal.yaml")
	yml := "data_dir: /from/yaml\nhttp_listen: 127.0.0.1:1\ngateway:\n  mqtt_listen: 127.0.0.1:2\n  connect_timeout: 3s\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load("shoal", []string{"--config", file, "--mqtt-listen", "127.0.0.1:3"},
		env(map[string]string{"SHOAL_HTTP_LISTEN": "127.0.0.1:4", "SHOAL_MQTT_LISTEN": "127.0.0.1:5", "SHOAL_WS_LISTEN": ""}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/yaml" {
		t.Errorf("data_dir = %q, want the YAML value", c.DataDir)
	}
	if c.HTTPListen != "127.0.0.1:4" {
		t.Errorf("http_listen = %q, want the environment's value over YAML", c.HTTPListen)
	}
	if c.Gateway.MQTTListen != "127.0.0.1:3" {
		t.Errorf("mqtt_listen = %q, want the flag's value over env and YAML", c.Gateway.MQTTListen)
	}
	if c.Gateway.WSListen != "" {
		t.Errorf("ws_listen = %q, want empty (set empty by env)", c.Gateway.WSListen)
	}
	if c.Gateway.ConnectTimeout != 3*time.Second {
		t.Errorf("connect_timeout = %v, want 3s", c.Gateway.ConnectTimeout)
	}
}

func TestLoadNamesBadKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(file, []byte("gateway:\n  mqtt_lisen: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load("shoal", []string{"--config", file}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "mqtt_lisen") {
		t.Fatalf("unknown YAML key: err = %v, want it named", err)
	}
	_, err = Load("shoal", []string{"--log-level", "loud"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "log_level") {
		t.Fatalf("bad log level: err = %v, want log_level named", err)
	}
	_, err = Load("shoal", nil, env(map[string]string{"SHOAL_KAFKA_PARTITIONS": "many"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SHOAL_KAFKA_PARTITIONS") {
		t.Fatalf("bad env: err = %v, want the variable named", err)
	}
	_, err = Load("shoal", []string{"--mqtt-listen", "", "--ws-listen", ""}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "gateway.mqtt_listen") {
		t.Fatalf("no listener: err = %v, want gateway.mqtt_listen named", err)
	}
}

func TestLoadSwitches(t *testing.T) {
	c, err := Load("shoal", []string{"--pprof", "true"}, env(map[string]string{"SHOAL_DATA_SYNC": "1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Pprof || !c.DataSync {
		t.Errorf("pprof %v, data_sync %v: want both on", c.Pprof, c.DataSync)
	}
	d := Default()
	if d.Pprof || d.DataSync {
		t.Errorf("defaults: pprof %v, data_sync %v: want both off", d.Pprof, d.DataSync)
	}
	_, err = Load("shoal", []string{"--data-sync", "maybe"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "data_sync") {
		t.Fatalf("bad data_sync: err = %v, want data_sync named", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "linger.yaml")
	if err := os.WriteFile(file, []byte("gateway:\n  produce_linger: 2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load("shoal", []string{"--config", file}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "gateway.produce_linger") {
		t.Fatalf("produce_linger 2s: err = %v, want gateway.produce_linger named", err)
	}
}
