package mm

import "runtime"

type memStats struct{ totalAlloc uint64 }

func (s *memStats) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.totalAlloc = ms.TotalAlloc
}
