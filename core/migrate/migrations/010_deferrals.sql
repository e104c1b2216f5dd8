-- A row counts the times a Retry-After answer put it off (relay: a
-- deferral refunds the attempt, so attempts alone cannot bound it). The
-- relay dead-letters a row whose deferrals reached its sink's
-- max_deferrals instead of putting it off once more, so a receiver that
-- answers 429 forever cannot hold rows forever. A redrive resets it with
-- the attempts. Adding a column with a constant default rewrites nothing.

ALTER TABLE messages ADD COLUMN deferrals integer NOT NULL DEFAULT 0;
