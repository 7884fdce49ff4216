package maptear

// setHooks sets the package's test hooks until the returned function is
// called.
func setHooks(dropNext bool, afterRead func()) (restore func()) {
	hooks.dropNext, hooks.afterRead = dropNext, afterRead
	return func() { hooks.dropNext, hooks.afterRead = false, nil }
}
