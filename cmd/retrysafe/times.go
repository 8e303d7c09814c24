package main

import (
	"fmt"
	"strings"
	"time"
)

// when writes t in UTC and relative to now: "2030-01-02 03:04:05 UTC (in
// 14m30s)", or "none" for the zero time.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format("2006-01-02 15:04:05 MST") + " (" + relative(t, now) + ")"
}

// relative writes t relative to now: "in 14m30s", "3h05m ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return "in " + span(d)
	case d < 0:
		return span(-d) + " ago"
	}
	return "now"
}

// span writes a positive duration with its two largest units: 45s,
// 14m30s, 3h05m, 2d07h.
func span(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// duration writes a duration such as an expiry without its zero units:
// 24h, 1h30m, 90s.
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
