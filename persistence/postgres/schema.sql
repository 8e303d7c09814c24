-- The table of the idempotency records of github.com/retrysafe/retrysafe's
-- PostgreSQL store (persistence/postgres), named "idempotency", in the
-- schema of the search_path. postgres.CreateTable runs these statements
-- for a table of any name; for another name, replace "idempotency" in the
-- three statements.
CREATE TABLE IF NOT EXISTS "idempotency" (
	id                     text COLLATE "C" PRIMARY KEY,
	status                 text NOT NULL CHECK (status IN ('INPROGRESS', 'COMPLETED')),
	expiration             bigint NOT NULL,
	in_progress_expiration bigint,
	validation             text,
	data                   bytea,
	owner_token            text NOT NULL,
	error_type             text,
	error_message          text,
	response_omitted       boolean NOT NULL DEFAULT false,
	held                   boolean NOT NULL DEFAULT false
);
-- The expiry sweep (Store.Sweep): expiration < now.
CREATE INDEX IF NOT EXISTS "idempotency_expiration_idx" ON "idempotency" (expiration);
-- Stuck reservations (Store.ListStuck): in progress past their in-progress
-- expiry. Only in-progress records are in it, so it stays small. Its
-- predicate names in_progress_expiration, which the fenced writes do not,
-- so that their plans use the primary key, whatever the statistics say.
CREATE INDEX IF NOT EXISTS "idempotency_in_progress_idx" ON "idempotency" (in_progress_expiration, id)
	WHERE status = 'INPROGRESS' AND in_progress_expiration IS NOT NULL;
