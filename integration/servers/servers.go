package servers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
	tcscylla "github.com/testcontainers/testcontainers-go/modules/scylladb"
)

// Mode is how the suites get their servers.
type Mode string

// The modes.
const (
	// Processes runs Kafka and Cassandra as local JVMs.
	Processes Mode = "processes"
	// Containers runs Kafka and ScyllaDB as containers (testcontainers-go).
	Containers Mode = "containers"
)

// EnvMode is the environment variable that forces a mode: "processes" or
// "containers"; unset, empty or "auto" chooses containers when a Docker
// engine answers, local processes otherwise.
const EnvMode = "SHOAL_IT_SERVERS"

// Images of the container mode, unless SHOAL_IT_KAFKA_IMAGE or
// SHOAL_IT_SCYLLA_IMAGE name others.
const (
	// KafkaImage is the image the kafka module of testcontainers-go
	// v0.40.0 is tested with (its start script needs Confluent's images).
	KafkaImage = "confluentinc/confluent-local:7.5.0"
	// ScyllaImage is the ScyllaDB image of the scylladb module's examples.
	ScyllaImage = "scylladb/scylla:6.2"
)

// ProbeTimeout bounds DockerEngine.
const ProbeTimeout = 5 * time.Second

// NoDocker is the line that says the suites fell back to local processes.
const NoDocker = "no Docker engine: starting Kafka and Cassandra as local processes"

// Choose returns the mode for setting (the value of EnvMode) and a line
// saying why, for the test output. probe reports whether a Docker engine
// answers (DockerEngine); it is not called when setting is "processes".
// Forcing containers without an engine, or an unknown setting, is an
// error.
func Choose(ctx context.Context, setting string, probe func(context.Context) error) (Mode, string, error) {
	switch setting {
	case string(Processes):
		return Processes, EnvMode + "=processes: starting Kafka and Cassandra as local processes", nil
	case string(Containers):
		if err := probe(ctx); err != nil {
			return "", "", fmt.Errorf("%s=containers, but no Docker engine answers: %w", EnvMode, err)
		}
		return Containers, EnvMode + "=containers: starting Kafka and ScyllaDB as containers", nil
	case "", "auto":
		if err := probe(ctx); err != nil {
			return Processes, fmt.Sprintf("%s (%v)", NoDocker, err), nil
		}
		return Containers, "Docker engine found: starting Kafka and ScyllaDB as containers", nil
	}
	return "", "", fmt.Errorf("%s=%q: want processes, containers or auto", EnvMode, setting)
}

// DockerEngine reports whether a Docker engine answers, by
// testcontainers-go's own provider health check (the Docker host it finds
// from DOCKER_HOST, the Docker context, the default and rootless sockets
// and ~/.testcontainers.properties, then an Info call), within
// ProbeTimeout or ctx. testcontainers-go panics when it finds no Docker
// host at all: that is an answer too. It caches the Docker host it found
// (or not) for the process: call DockerEngine once.
func DockerEngine(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("docker provider: %v", r)
			}
		}()
		p, err := testcontainers.ProviderDocker.GetProvider()
		if err != nil {
			done <- fmt.Errorf("docker provider: %w", err)
			return
		}
		if err := p.Health(ctx); err != nil {
			done <- fmt.Errorf("docker engine health: %w", err)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("docker engine health: %w", ctx.Err())
	}
}

// KafkaContainer is a one-node Kafka (KRaft) in a container.
type KafkaContainer struct {
	c       *tckafka.KafkaContainer
	brokers []string
}

// StartKafka starts a Kafka container of image and waits until it runs.
func StartKafka(ctx context.Context, image string) (*KafkaContainer, error) {
	c, err := tckafka.Run(ctx, image, tckafka.WithClusterID("shoal-it"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start kafka container %s: %w", image, err), testcontainers.TerminateContainer(c))
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("kafka container %s: brokers: %w", image, err), testcontainers.TerminateContainer(c))
	}
	return &KafkaContainer{c: c, brokers: brokers}, nil
}

// Brokers returns the broker's host:port on this machine.
func (k *KafkaContainer) Brokers() []string { return append([]string(nil), k.brokers...) }

// Stop removes the container.
func (k *KafkaContainer) Stop() error {
	if err := testcontainers.TerminateContainer(k.c); err != nil {
		return fmt.Errorf("stop kafka container: %w", err)
	}
	return nil
}

// ScyllaContainer is a one-node ScyllaDB in a container.
type ScyllaContainer struct {
	c     *tcscylla.Container
	hosts []string
}

// StartScylla starts a ScyllaDB container of image (one shard, 1 GiB) and
// waits until it answers CQL.
func StartScylla(ctx context.Context, image string) (*ScyllaContainer, error) {
	c, err := tcscylla.Run(ctx, image, tcscylla.WithCustomCommands("--memory=1G"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start scylladb container %s: %w", image, err), testcontainers.TerminateContainer(c))
	}
	host, err := c.NonShardAwareConnectionHost(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("scylladb container %s: host: %w", image, err), testcontainers.TerminateContainer(c))
	}
	return &ScyllaContainer{c: c, hosts: []string{host}}, nil
}

// Hosts returns the CQL host:port on this machine.
func (s *ScyllaContainer) Hosts() []string { return append([]string(nil), s.hosts...) }

// Stop removes the container.
func (s *ScyllaContainer) Stop() error {
	if err := testcontainers.TerminateContainer(s.c); err != nil {
		return fmt.Errorf("stop scylladb container: %w", err)
	}
	return nil
}
