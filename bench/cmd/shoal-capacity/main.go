package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shoal-capacity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := defaultParams
	root := fs.String("root", ".", "the repository's root, where bench/*.json are")
	write := fs.String("write", "", "a Markdown file whose part between the model's markers is replaced (docs/capacity.md)")
	fs.Float64Var(&p.VCPU, "vcpu", p.VCPU, "cores of a node")
	fs.Float64Var(&p.MemGiB, "mem-gib", p.MemGiB, "memory of a node, GiB")
	fs.Float64Var(&p.CPUTarget, "cpu-target", p.CPUTarget, "share of a node's cores the steady load may take")
	fs.Float64Var(&p.MemTarget, "mem-target", p.MemTarget, "share of a node's memory the steady load may take")
	fs.IntVar(&p.RF, "rf", p.RF, "replication factor of the topics and the keyspace")
	fs.IntVar(&p.MinPartitions, "partitions", p.MinPartitions, "partitions per event topic at the least")
	fs.IntVar(&p.MinShoal, "min-nodes", p.MinShoal, "nodes of each Shoal role at the least")
	fs.Float64Var(&p.WriteMBs, "write-mbs", p.WriteMBs, "log a Kafka node may write, MB/s, replicas included")
	fs.Float64Var(&p.Retention, "retention-h", p.Retention, "hours the log is kept (kafka.retention)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := p.check(); err != nil {
		fmt.Fprintln(stderr, "shoal-capacity:", err)
		return 2
	}
	out, err := model(*root, p)
	if err == nil && *write != "" {
		err = writeBetween(*write, out)
	} else if err == nil {
		_, err = io.WriteString(stdout, out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal-capacity:", err)
		return 1
	}
	return 0
}

// model reads the measured files under root and renders the model.
func model(root string, p params) (string, error) {
	in, err := readInputs(root)
	if err != nil {
		return "", err
	}
	c, err := unitCosts(in)
	if err != nil {
		return "", err
	}
	ss := make([]sizing, 0, len(workloads))
	for _, w := range workloads {
		ss = append(ss, size(w, c, p))
	}
	return render(in, c, p, ss), nil
}

func (p params) check() error {
	switch {
	case p.VCPU <= 0:
		return fmt.Errorf("-vcpu: %g (want > 0)", p.VCPU)
	case p.MemGiB <= 0:
		return fmt.Errorf("-mem-gib: %g (want > 0)", p.MemGiB)
	case p.CPUTarget <= 0 || p.CPUTarget > 1:
		return fmt.Errorf("-cpu-target: %g (want 0–1)", p.CPUTarget)
	case p.MemTarget <= 0 || p.MemTarget > 1:
		return fmt.Errorf("-mem-target: %g (want 0–1)", p.MemTarget)
	case p.RF < 1:
		return fmt.Errorf("-rf: %d (want ≥ 1)", p.RF)
	case p.MinPartitions < 1:
		return fmt.Errorf("-partitions: %d (want ≥ 1)", p.MinPartitions)
	case p.WriteMBs <= 0:
		return fmt.Errorf("-write-mbs: %g (want > 0)", p.WriteMBs)
	case p.Retention <= 0:
		return fmt.Errorf("-retention-h: %g (want > 0)", p.Retention)
	case p.MinShoal < 1:
		return fmt.Errorf("-min-nodes: %d (want ≥ 1)", p.MinShoal)
	}
	return nil
}

// between is the part of doc between the markers, and where it is.
func between(doc string) (start, end int, err error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return 0, 0, errors.New("no model markers (" + beginMarker + " … " + endMarker + ")")
	}
	return i + len(beginMarker) + 1, j, nil
}

// writeBetween replaces the part of the file at path between the markers
// with out.
func writeBetween(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	i, j, err := between(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(doc[:i]+out+doc[j:]), 0o644)
}
