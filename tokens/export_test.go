package tokens

// The package's test seams: the only place where tests switch a
// Manager's defences off.

// setDefences replaces a Manager's defences, for control runs that must
// find the violation a defence prevents. Each test that proves a defence
// turns that one off alone.
func (m *Manager) setDefences(d defences) {
	m.defences = d
	m.s = newScripts(d, m.opts.WaitReplicas > 0)
	if m.cache != nil {
		m.cache.unguarded = d.noCacheGuard
	}
}

// setDefences replaces the defences of a cookie transport, for control
// runs that must find the violation a defence prevents.
func (c *Cookies) setDefences(d cookieDefences) { c.def = d }
