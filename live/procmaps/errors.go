package procmaps

import "mmlab/live"

// ErrNotSupported is what Open returns on systems other than Linux; it
// wraps live.ErrNotSupported.
var ErrNotSupported = live.Unsupported("procmaps: /proc/PID/maps and PROCMAP_QUERY need Linux")
