package config

import (
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestSizeKeysTakeUnits: every size key of the file takes a plain number
// of bytes, an IEC unit (KiB, MiB, GiB: powers of 1024) or an SI unit (kB,
// MB, GB: powers of 1000), with or without a space, as the README writes
// the defaults ("1 MiB").
func TestSizeKeysTakeUnits(t *testing.T) {
	get := map[string]func(Config) int64{
		"gateway.max_packet_size":     func(c Config) int64 { return int64(c.Gateway.MaxPacketSize) },
		"gateway.max_out_buffer":      func(c Config) int64 { return int64(c.Gateway.MaxOutBuffer) },
		"cql.max_batch_bytes":         func(c Config) int64 { return int64(c.CQL.MaxBatchBytes) },
		"kafka.retention_bytes":       func(c Config) int64 { return c.Kafka.RetentionBytes },
		"tenants.acme.max_bytes_rate": func(c Config) int64 { return int64(*c.Tenants["acme"].MaxBytesRate) },
	}
	for _, tc := range []struct {
		value string
		want  int64
	}{
		{"1048576", 1 << 20},
		{`"1048576"`, 1 << 20},
		{"1MiB", 1 << 20},
		{"1 MiB", 1 << 20},
		{`"1 MiB"`, 1 << 20},
		{"'1 MiB'", 1 << 20},
		{"1mib", 1 << 20},
		{"512KiB", 512 << 10},
		{"512 KiB", 512 << 10},
		{"1.5 MiB", 3 << 19},
		{"0.25GiB", 1 << 28},
		{"2MB", 2_000_000},
		{"2 MB", 2_000_000},
		{"64kB", 64_000},
		{"64 kB", 64_000},
		{"0.25 GB", 250_000_000},
		{"100000B", 100_000},
		{"100000 B", 100_000},
	} {
		for key, value := range get {
			t.Run(key+"="+tc.value, func(t *testing.T) {
				c, err := loadYAML(t, nested(key, tc.value))
				if err != nil {
					t.Fatalf("%s: %s: %v", key, tc.value, err)
				}
				if got := value(c); got != tc.want {
					t.Errorf("%s: %s is %d bytes, want %d", key, tc.value, got, tc.want)
				}
			})
		}
	}
}

// TestSizeKeysInFlowStyle: several sizes on one line are each read, and
// the lines of the errors after them stay those of the file.
func TestSizeKeysInFlowStyle(t *testing.T) {
	c, err := loadYAML(t, "gateway: {max_packet_size: 2 MiB, max_out_buffer: 8MiB}\ncql: {max_batch_bytes: 40 KiB}\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.MaxPacketSize != 2<<20 || c.Gateway.MaxOutBuffer != 8<<20 || c.CQL.MaxBatchBytes != 40<<10 {
		t.Errorf("max_packet_size %d, max_out_buffer %d, max_batch_bytes %d; want 2 MiB, 8 MiB, 40 KiB",
			c.Gateway.MaxPacketSize, c.Gateway.MaxOutBuffer, c.CQL.MaxBatchBytes)
	}
	_, err = loadYAML(t, "gateway:\n  max_packet_size: 2 MiB\n  connect_timeout: soon\n")
	if err == nil || !strings.Contains(err.Error(), "gateway.connect_timeout (line 3)") {
		t.Errorf("err = %v, want gateway.connect_timeout (line 3) named", err)
	}
}

// TestBadSizesNameTheKey: a size that is not one is refused with its key,
// its line and the units it may take.
func TestBadSizesNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"gateway:\n  max_packet_size: 1 MeB\n", `gateway.max_packet_size (line 2): "1 MeB": unknown unit "MeB"`},
		{"gateway:\n  max_packet_size: lots\n", `gateway.max_packet_size (line 2): "lots"`},
		{"gateway:\n  max_packet_size: 5GiB\n", "gateway.max_packet_size (line 2): \"5GiB\" is 5368709120 bytes, more than 4294967295"},
		{"gateway:\n  max_packet_size: 10 B\n", "gateway.max_packet_size: must be between 64 and 268435460 bytes"},
		{"log_level: info\ngateway:\n  max_out_buffer: 4 MiBs\n", `gateway.max_out_buffer (line 3): "4 MiBs": unknown unit`},
		{"cql:\n  max_batch_bytes: 40 KB/s\n", `cql.max_batch_bytes (line 2): "40 KB/s": unknown unit`},
		{"kafka:\n  retention_bytes: -2 MiB\n", "kafka.retention_bytes: must be a number of bytes per partition"},
		{"tenants:\n  acme:\n    max_bytes_rate: 10 XB\n", `tenants.acme.max_bytes_rate (line 3): "10 XB": unknown unit`},
	} {
		_, err := loadYAML(t, tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v\nwant it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

// TestSizeFlagsTakeUnits: the size keys reachable by flag and variable
// take the same units, and a bad one names the key.
func TestSizeFlagsTakeUnits(t *testing.T) {
	c, err := Load("shoal", []string{"--kafka-retention-bytes", "20 MiB"}, env(nil), io.Discard)
	if err != nil || c.Kafka.RetentionBytes != 20<<20 {
		t.Errorf("--kafka-retention-bytes '20 MiB': %d, %v; want 20 MiB", c.Kafka.RetentionBytes, err)
	}
	c, err = Load("shoal", nil, env(map[string]string{"SHOAL_KAFKA_RETENTION_BYTES": "2GB"}), io.Discard)
	if err != nil || c.Kafka.RetentionBytes != 2_000_000_000 {
		t.Errorf("SHOAL_KAFKA_RETENTION_BYTES=2GB: %d, %v; want 2 GB", c.Kafka.RetentionBytes, err)
	}
	c, err = Load("shoal", []string{"--kafka-retention-bytes", "-1"}, env(nil), io.Discard)
	if err != nil || c.Kafka.RetentionBytes != -1 {
		t.Errorf("--kafka-retention-bytes -1: %d, %v; want -1", c.Kafka.RetentionBytes, err)
	}
	_, err = Load("shoal", []string{"--kafka-retention-bytes", "20 MeB"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "kafka.retention_bytes") || !strings.Contains(err.Error(), "unknown unit") {
		t.Errorf("--kafka-retention-bytes '20 MeB': err = %v, want kafka.retention_bytes and the unit named", err)
	}
}

// TestEverySizeKeyTakesUnits: a key of the file that holds a number of
// bytes (its name ends in _size, _bytes, _buffer or _bytes_rate) is one of
// sizeKeys, so that a new one cannot miss the units.
func TestEverySizeKeyTakesUnits(t *testing.T) {
	known := map[string]bool{}
	for _, k := range sizeKeys {
		known[k.path] = true
	}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "-" || !f.IsExported() {
				continue
			}
			p := tag
			if path != "" && tag != "" {
				p = path + "." + tag
			} else if tag == "" {
				p = path // inline
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				if ft.PkgPath() != "time" {
					walk(ft, p)
				}
			case reflect.Map:
				if ft.Elem().Kind() == reflect.Struct {
					walk(ft.Elem(), p+".*")
				}
			case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
				if ft.PkgPath() == "time" {
					continue
				}
				for _, suffix := range []string{"_size", "_bytes", "_buffer", "_bytes_rate"} {
					if strings.HasSuffix(tag, suffix) && !known[p] {
						t.Errorf("%s holds bytes but is not in sizeKeys: it takes no units", p)
					}
				}
			}
		}
	}
	walk(reflect.TypeFor[fileShape](), "")
	if len(known) < 5 {
		t.Errorf("sizeKeys has %d keys, want at least the five the README names", len(known))
	}
}

// nested writes key (a dotted path) = value as a YAML document.
func nested(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i == len(parts)-1 {
			b.WriteString(" " + value)
		}
		b.WriteString("\n")
	}
	return b.String()
}
