package procmaps

import "errors"

// ErrNotSupported is what Open returns on systems other than Linux.
var ErrNotSupported = errors.New("procmaps: /proc/PID/maps and uapi.PROCMAP_QUERY need Linux: not supported on this system")
