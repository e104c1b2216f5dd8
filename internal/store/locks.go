package store

// AdvisoryLockNamespace is the first key of every two-argument advisory lock
// outboxd takes ("obx" in ASCII). Applications using the one-argument form,
// or other namespaces, can never collide with it.
const AdvisoryLockNamespace int32 = 0x6f6278

// LockKeyMigrate is the second key, within AdvisoryLockNamespace, of the
// lock migrations queue on; it is combined with a hash of the schema name so
// independent outboxes do not contend. (Key 2 was the maintenance lock,
// before the relays' one leader election replaced it.)
const LockKeyMigrate = 1

// LockKeyTenantQuota is the second key, within AdvisoryLockNamespace, of
// the lock a tenant's quota is checked under (package destinations); it is
// combined with a hash of the schema and the tenant, so that two requests
// of one tenant count in turn (a race cannot pass a quota) and other
// tenants do not wait.
const LockKeyTenantQuota = 3
