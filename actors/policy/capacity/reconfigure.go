package capacity

import "time"

// Reconfigure takes a reload's configuration at now. Effective lanes that were never
// learned follow the configured lanes up or down; learned ones stay what the backend showed,
// cut to the new ceiling (a reload does not make a backend take more). Turning learning off
// sets them to the configured lanes. It returns the change when the effective lanes moved.
func (l *Lanes) Reconfigure(cfg Config, now time.Time) (Change, bool) {
	learned := l.reason != Configured && !l.disabled
	l.lanes, l.disabled = max(cfg.Lanes, 1), cfg.Disabled
	if l.probe = cfg.Probe; l.probe <= 0 {
		l.probe = DefaultProbe
	}
	l.ceiling = min(l.ceiling, l.lanes)
	if !learned || l.disabled {
		l.ceiling = l.lanes
		ch, changed := l.set(l.lanes, Configured, now)
		l.reason = Configured
		return ch, changed
	}
	if l.eff > l.lanes {
		return l.set(l.lanes, l.reason, now)
	}
	return Change{}, false
}
