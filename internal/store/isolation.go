package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// TxBeginner is a pool or a connection: a handle that can start a
// transaction with options of its own. A pgx.Tx is not one (its Begin is a
// savepoint inside a snapshot already taken).
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Beginner is anything that can start a transaction: a pool, a connection
// or a transaction (a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ReadCommitted runs fn in a transaction of db that is READ COMMITTED
// whatever the database's or role's default_transaction_isolation says.
// Work that first waits for a lock (an advisory lock, a FOR UPDATE) and then
// reads what the lock's previous holder committed needs it: under
// REPEATABLE READ or SERIALIZABLE the transaction's snapshot is taken by its
// first statement, before the wait, so the previous holder's work stays
// invisible and is done a second time ("relation already exists") or fails
// to serialize. When db cannot start a transaction of its own (it is the
// caller's transaction), fn runs in a savepoint of it and the caller's
// isolation level applies.
func ReadCommitted(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	if b, ok := db.(TxBeginner); ok {
		return pgx.BeginTxFunc(ctx, b, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
	}
	return pgx.BeginFunc(ctx, db, fn)
}
