package sessionsvc

// NewMemStore returns the in-memory Store of the unit tests, for the
// external tests (the conformance suite runs against it too).
func NewMemStore() Store { return newMemStore() }
