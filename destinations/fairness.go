package destinations

import "context"

// TenantOf names the tenant of destination id, "" when it does not exist
// or cannot be read. The relay holds each tenant's deliveries to its share
// of a destinations sink's slots by it (Quotas.TenantShareOfSlots), so a
// tenant whose endpoints are slow or many delays only itself. Like Find,
// it touches the database only for a destination it does not know yet.
func (d *Directory) TenantOf(ctx context.Context, id string) string {
	l, ok, err := d.Find(ctx, id)
	if err != nil || !ok {
		return ""
	}
	return l.Tenant
}
