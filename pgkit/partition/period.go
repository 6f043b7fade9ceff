package partition

import (
	"fmt"
	"time"
)

// A Period is how much time one partition holds. Periods start at
// midnight UTC: a day, a week from Monday, a calendar month.
type Period int

// The periods. The zero Period means Day in Options.
const (
	Day Period = iota + 1
	Week
	Month
)

// String returns "day", "week" or "month".
func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

// start returns the start of the period that holds t, in UTC.
func (p Period) start(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case Week:
		return day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// next returns the start of the period after the one that starts at s.
func (p Period) next(s time.Time) time.Time {
	switch p {
	case Week:
		return s.AddDate(0, 0, 7)
	case Month:
		return s.AddDate(0, 1, 0)
	}
	return s.AddDate(0, 0, 1)
}

// suffix is what a partition's name adds to the table's: _pYYYYMMDD for
// days and weeks (the week's Monday), _pYYYYMM for months. The names sort
// as the periods do.
func (p Period) suffix(s time.Time) string {
	if p == Month {
		return s.Format("_p200601")
	}
	return s.Format("_p20060102")
}
