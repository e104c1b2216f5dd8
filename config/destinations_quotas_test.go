package config

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
)

// The tenants' quotas default to destinations.DefaultQuotas, are read from
// destinations.quotas, and a quota below 1 is a problem at its key.
// Which sinks deliver to destinations is the configuration's answer: those
// whose type looks up the directory, not those of a type's name.
// (Mutations: checkDestinations comparing with < 0 loads the file with a
// zero quota; DestinationSinks keeping every sink names the webhook sink
// too; checkDestinations letting a share up to 100 through loads a
// tenant_share_of_slots of 1.5.)
func TestDestinationQuotasAndSinks(t *testing.T) {
	t.Parallel()
	sinks := "sinks:\n  customers: {type: destinations}\n  partner: {type: webhook, options: {url: 'https://partner.example/hook'}}\n"
	loaded, err := loadFile(t, sinks, DatabaseOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.Config.DestinationQuotas(); got != destinations.DefaultQuotas() {
		t.Errorf("default quotas %+v, want %+v", got, destinations.DefaultQuotas())
	}
	if got := loaded.Config.DestinationSinks(); len(got) != 1 || got[0] != "customers" || loaded.Config.TestEventSink() != "customers" {
		t.Errorf("sinks delivering to destinations %v, test events through %q; want customers", got, loaded.Config.TestEventSink())
	}
	if err := loaded.Config.CheckDestinationSink("partner"); err == nil || !strings.Contains(err.Error(), "the sinks that do: customers") {
		t.Errorf("partner as a destinations sink: %v", err)
	}
	loaded, err = loadFile(t, "destinations:\n  quotas: {endpoints_per_tenant: 5, test_events_per_minute: 2}\n"+sinks, DatabaseOnly, nil)
	if err != nil || loaded.Config.DestinationQuotas() != (destinations.Quotas{EndpointsPerTenant: 5, TestEventsPerMinute: 2, TenantShareOfSlots: destinations.DefaultTenantShareOfSlots}) {
		t.Errorf("quotas set: %v %+v", err, loaded)
	}
	_, err = loadFile(t, "destinations:\n  quotas: {endpoints_per_tenant: 0, test_events_per_minute: -1, tenant_share_of_slots: 1.5}\n"+sinks, DatabaseOnly, nil)
	if err == nil || !strings.Contains(err.Error(), destinations.KeyEndpointsPerTenant) || !strings.Contains(err.Error(), destinations.KeyTestEventsPerMinute) ||
		!strings.Contains(err.Error(), destinations.KeyTenantShareOfSlots) {
		t.Errorf("quotas below 1 and a share above 1: %v, want a problem at each key", err)
	}
}
