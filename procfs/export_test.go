package procfs

// SetBrokenSkip sets f's skip hook (see MapsFile.skip); nil removes it.
func (f *MapsFile) SetBrokenSkip(skip func(start uint64, query bool) bool) { f.skip = skip }
