// Benchmarks run only to produce `go test -bench` golden output (see ../regenerate.sh): plain
// timings, sub-benchmarks, allocations, bytes per second and a custom metric.
package golden

import (
	"fmt"
	"testing"
)

var sink []byte

func BenchmarkSum(b *testing.B) {
	total := 0
	for i := 0; i < b.N; i++ {
		for j := 0; j < 100; j++ {
			total += j * j
		}
	}
	_ = total
}

func BenchmarkCopy(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			src := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sink = append([]byte(nil), src...)
			}
			b.ReportMetric(float64(size)/8, "words/op")
		})
	}
}
