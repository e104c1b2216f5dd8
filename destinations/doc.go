// Package destinations makes webhook destinations data: a tenant (a string
// id the application already has) owns destinations, each an endpoint
// with its own signing secrets, subscribed event types, rate limit and
// enabled state, created and changed at runtime through outboxd's API and
// CLI and stored in the outbox schema (migration 016).
//
// A route target {sink: customers, tenant: "{{.data.account_id}}"} of a
// sink of type destinations makes publish() write one row per destination
// of that tenant subscribed to the event's type, in the producer's
// transaction. [Store] manages destinations; [Directory] keeps a relay's
// view of them current; [Sink] delivers their rows under the one network
// policy ([NetworkConfig]), and [HookRelay] gives the relay what it needs
// of such a sink; [Keyring] seals their signing secrets with AES-GCM under
// keys from the environment ([EnvSecretsKey]), so a dump of the database
// alone does not reveal them. Package sinks/destinations names the sink
// type for plugins.yaml.
// See docs/destinations.md.
package destinations
