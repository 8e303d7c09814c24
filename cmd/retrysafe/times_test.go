package main

import (
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		d          time.Duration
		span, text string
	}{
		{45 * time.Second, "45s", "45s"},
		{90 * time.Second, "1m30s", "1m30s"},
		{time.Hour, "1h00m", "1h"},
		{24 * time.Hour, "1d00h", "24h"},
		{26*time.Hour + 30*time.Minute, "1d02h", "26h30m"},
		{10 * time.Minute, "10m00s", "10m"},
	} {
		if got := span(tc.d); got != tc.span {
			t.Errorf("span(%v) = %q, want %q", tc.d, got, tc.span)
		}
		if got := duration(tc.d); got != tc.text {
			t.Errorf("duration(%v) = %q, want %q", tc.d, got, tc.text)
		}
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{now.Add(90 * time.Second), "in 1m30s"},
		{now.Add(-3 * time.Hour), "3h00m ago"},
		{now.Add(400 * time.Millisecond), "now"},
	} {
		if got := relative(tc.t, now); got != tc.want {
			t.Errorf("relative(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}
