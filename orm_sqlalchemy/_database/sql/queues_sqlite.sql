-- Paused named queues (jobs.spi.QueuePauses). {table} is the quoted paused-queues table; the
-- store's clock as in jobs_sqlite.sql. A row per paused queue: runners leave it out of their claims.

-- name: pause_queue
INSERT INTO {table} (queue, paused_at) VALUES (:queue, :now)
ON CONFLICT (queue) DO NOTHING
RETURNING 1;

-- name: resume_queue
DELETE FROM {table} WHERE queue = :queue
RETURNING 1;

-- name: paused_queues
SELECT queue FROM {table} ORDER BY queue;
