// Package epoch converts times to the epoch numbers that stores keep,
// rounded up, for the stores' conditions on expiry.
package epoch

import "time"

// CeilSeconds returns t in epoch seconds, rounded up. For a whole number
// of seconds e, e < CeilSeconds(t) exactly when time.Unix(e, 0) is before
// t.
func CeilSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// CeilMillis returns t in epoch milliseconds, rounded up. For a whole
// number of milliseconds m, m < CeilMillis(t) exactly when
// time.UnixMilli(m) is before t.
func CeilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) > 0 {
		ms++
	}
	return ms
}
