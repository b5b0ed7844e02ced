package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

type sink struct {
	coltracepb.UnimplementedTraceServiceServer
	spans atomic.Int64
}

func (s *sink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	s.spans.Add(int64(n))
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:4317", "loopback address to serve OTLP/gRPC on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	s := &sink{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, s)
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		<-ch
		srv.Stop()
	}()
	_ = srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "otlp-sink: %d spans received\n", s.spans.Load())
}
