package pgtable

// setLockingHook sets t's locking hook (Table.hooks) to f.
func (t *Table) setLockingHook(f func()) { t.hooks.locking = f }
