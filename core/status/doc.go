// Package status declares, once, the words that name where things stand
// in outboxd: a row's status in its life cycle ([Row]), a circuit
// breaker's state ([Breaker]) and the event types a breaker publishes
// when it changes. Every other package (the relay, its completer and
// services, the operator, the API, the console and the CLI) spells them
// through these constants, so a word cannot drift between two of them.
//
// It is a public leaf that imports nothing of the project, like the sink
// contract (package sink), for two reasons: the operator's public API
// (operator.Message, operator.MessageFilter, operator.BreakerState)
// exposes statuses and breaker states, so a program using it must be
// able to name them; and a leaf can be imported by every package of the
// engine, internal ones included, without an import cycle. The values
// are wire values (the messages table's status column, JSON fields,
// metric labels, event types): they never change.
package status
