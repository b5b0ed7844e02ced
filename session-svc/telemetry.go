package sessionsvc

import "github.com/shoal-mqtt/shoal/internal/obs"

// SetTelemetry gives the service the providers it reports through; call it
// before Run. Without it the service records no spans and no metrics.
func (s *Service) SetTelemetry(p obs.Providers) {
	s.tel = p.WithDefaults()
	s.m.tracer = nil
	if s.tel.Tracing {
		s.m.tracer = s.tel.Tracer.Tracer(obs.Scope)
	}
	if err := s.registerMetrics(); err != nil {
		s.log.Warn("session metrics", "err", err)
	}
}
