package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The measured files the model reads, each written by a bench target
// (docs/capacity.md names them). Only the fields the model uses are
// declared.

// unitsFile is bench/units.json (make bench-units).
type unitsFile struct {
	Date       string      `json:"date"`
	Commit     string      `json:"commit"`
	CPU        string      `json:"cpu"`
	Cores      int         `json:"cores"`
	Partitions int         `json:"partitions"`
	Units      []unitPhase `json:"units"`
}

// unitPhase is one phase's costs per message, connect or subscription.
type unitPhase struct {
	Name         string             `json:"name"`
	Payload      int                `json:"payload_bytes"`
	CPU          map[string]float64 `json:"cpu_us"`
	CPUDelivery  map[string]float64 `json:"cpu_us_per_delivery"`
	KafkaRecords map[string]float64 `json:"kafka_records"`
	KafkaBytes   float64            `json:"kafka_bytes"`
	CQLWrites    float64            `json:"cql_writes"`
	GatewayRSS   float64            `json:"gateway_rss_bytes"`
	HeapBytes    map[string]float64 `json:"heap_live_bytes"`
	RSSBytes     map[string]float64 `json:"rss_bytes"`
	Lost         uint64             `json:"lost_or_undelivered"`
}

// stormFile is bench/connect-storm.json (make bench-connect-storm).
type stormFile struct {
	Date   string `json:"date"`
	Storms []struct {
		Sessions int                `json:"session_services"`
		Wave     string             `json:"wave"`
		Failed   int                `json:"failed"`
		PerSec   float64            `json:"connects_per_s"`
		CPU      map[string]float64 `json:"cpu_us_per_connect"`
	} `json:"storms"`
}

// ticksFile is bench/partition-costs.json (make bench-partition-costs).
type ticksFile struct {
	Date      string             `json:"date"`
	PerRecord map[string]float64 `json:"cpu_us_per_record"`
}

// holdFile is bench/fleet-hold.json (make bench-fleet-hold): many idle
// devices held at once, each with a persistent session and one
// subscription.
type holdFile struct {
	Date        string             `json:"date"`
	Connections int                `json:"connections"`
	Gateways    int                `json:"gateways"`
	KeepAliveS  int                `json:"keepalive_s"`
	RSS         map[string]float64 `json:"rss_bytes_per_connection"`
	KernelTCP   float64            `json:"kernel_tcp_bytes_per_connection"`
	IdleCPU     map[string]float64 `json:"cpu_us_per_connection_second"`
}

// inputs are the files read, by their path relative to the repository.
type inputs struct {
	units unitsFile
	storm stormFile
	ticks ticksFile
	// hold is nil until bench/fleet-hold.json exists: the model then
	// says which figures it lacks.
	hold *holdFile
}

// Where the model's inputs are, relative to the repository's root.
const (
	unitsPath = "bench/units.json"
	stormPath = "bench/connect-storm.json"
	ticksPath = "bench/partition-costs.json"
	holdPath  = "bench/fleet-hold.json"
)

// readInputs reads the measured files under root.
func readInputs(root string) (*inputs, error) {
	in := &inputs{}
	for _, f := range []struct {
		path string
		into any
	}{{unitsPath, &in.units}, {stormPath, &in.storm}, {ticksPath, &in.ticks}} {
		if err := readJSON(filepath.Join(root, f.path), f.into); err != nil {
			return nil, err
		}
	}
	var h holdFile
	switch err := readJSON(filepath.Join(root, holdPath), &h); {
	case err == nil:
		in.hold = &h
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	return in, in.check()
}

func readJSON(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// phase is the units phase of that name.
func (in *inputs) phase(name string) (unitPhase, error) {
	for _, p := range in.units.Units {
		if p.Name == name {
			return p, nil
		}
	}
	return unitPhase{}, fmt.Errorf("%s: no phase %q", unitsPath, name)
}

// usedPhases are the units phases the model takes costs from.
var usedPhases = []string{phaseQoS1, phasePersistent, phaseFanout, phaseResumed, phaseConcrete}

// The units phases the model uses.
const (
	phaseQoS1       = "pairs-qos1"
	phasePersistent = "pairs-qos1-persistent"
	phaseFanout     = "fanout-1000-qos0"
	phaseResumed    = "connect-persistent-resumed"
	phaseConcrete   = "subscribe-concrete"
)

// check refuses inputs the model cannot use: a phase missing, or one
// that lost messages (its costs would be of less work than was asked).
func (in *inputs) check() error {
	for _, name := range usedPhases {
		p, err := in.phase(name)
		if err != nil {
			return err
		}
		if p.Lost > 0 {
			return fmt.Errorf("%s: phase %s lost %d messages: its costs cannot be used", unitsPath, name, p.Lost)
		}
		if len(p.CPU) == 0 {
			return fmt.Errorf("%s: phase %s has no CPU figures", unitsPath, name)
		}
	}
	if len(in.ticks.PerRecord) == 0 {
		return fmt.Errorf("%s: no cpu_us_per_record", ticksPath)
	}
	if in.hold != nil && (in.hold.Connections == 0 || len(in.hold.RSS) == 0) {
		return fmt.Errorf("%s: no connections or rss_bytes_per_connection", holdPath)
	}
	return nil
}
