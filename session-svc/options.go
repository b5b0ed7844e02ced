package sessionsvc

import "github.com/shoal-mqtt/shoal/internal/obs"

// Option completes a Service at construction (New). A service without
// options answers through the log alone and reports nothing.
type Option func(*Service)

// WithAnswers makes the service give its answers to a before it produces
// them, which saves the CONNECT the answer's produce round trip and the
// slot consumer's read; the answers are produced all the same
// (docs/local-path.md).
func WithAnswers(a Answers) Option { return func(s *Service) { s.answers = a } }

// WithTelemetry gives the service the providers it reports through.
// Without it the service records no spans and no metrics.
func WithTelemetry(p obs.Providers) Option {
	return func(s *Service) {
		s.tel = p.WithDefaults()
		s.m.tracer = nil
		if s.tel.Tracing {
			s.m.tracer = s.tel.Tracer.Tracer(obs.Scope)
		}
		if err := s.registerMetrics(); err != nil {
			s.log.Warn("session metrics", "err", err)
		}
	}
}
