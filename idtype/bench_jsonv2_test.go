//go:build goexperiment.jsonv2

package idtype

import "testing"

func BenchmarkJSONv2(b *testing.B) { benchJSON(b) }
