-- Outcome counter statements for PostgreSQL. {table} is the quoted counters table; {now} as
-- in jobs_postgresql.sql. One row per (minute, type, outcome); batches add to it.

-- name: add_counts
INSERT INTO {table} AS c (minute, type, outcome, count, duration_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9)
VALUES (
    CAST(:minute AS bigint), CAST(:type AS text), CAST(:outcome AS text), CAST(:count AS bigint),
    CAST(:duration_ms AS bigint), CAST(:b0 AS bigint), CAST(:b1 AS bigint), CAST(:b2 AS bigint), CAST(:b3 AS bigint), CAST(:b4 AS bigint), CAST(:b5 AS bigint), CAST(:b6 AS bigint), CAST(:b7 AS bigint), CAST(:b8 AS bigint), CAST(:b9 AS bigint)
)
ON CONFLICT (minute, type, outcome) DO UPDATE SET
    count = c.count + excluded.count,
    duration_ms = c.duration_ms + excluded.duration_ms,
    b0 = c.b0 + excluded.b0,
    b1 = c.b1 + excluded.b1,
    b2 = c.b2 + excluded.b2,
    b3 = c.b3 + excluded.b3,
    b4 = c.b4 + excluded.b4,
    b5 = c.b5 + excluded.b5,
    b6 = c.b6 + excluded.b6,
    b7 = c.b7 + excluded.b7,
    b8 = c.b8 + excluded.b8,
    b9 = c.b9 + excluded.b9;

-- name: prune_counts
DELETE FROM {table} WHERE minute < {now} - CAST(:keep_ms AS bigint);

-- name: read_counts
SELECT minute, type, outcome, count, duration_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9
FROM {table}
WHERE minute >= CAST(:since AS bigint) AND (CAST(:type AS text) IS NULL OR type = CAST(:type AS text))
ORDER BY minute, type, outcome;
