module github.com/shoal-mqtt/shoal

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/planetscale/vtprotobuf v0.6.0
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go v1.22.2 // indirect
	github.com/twmb/franz-go/pkg/kadm v1.19.0 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.0 // indirect
)
