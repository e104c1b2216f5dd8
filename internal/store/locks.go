package store

// AdvisoryLockNamespace is the first key of every two-argument advisory lock
// outboxd takes ("obx" in ASCII). Applications using the one-argument form,
// or other namespaces, can never collide with it.
const AdvisoryLockNamespace int32 = 0x6f6278

// Second keys within AdvisoryLockNamespace; each is combined with a hash of
// the schema name so independent outboxes do not contend.
const (
	LockKeyMigrate     = 1
	LockKeyMaintenance = 2
)
