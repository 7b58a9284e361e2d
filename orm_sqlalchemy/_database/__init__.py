"""The SQL stores' private database layer: connections, error translation, statements, the
LISTEN connection and wake-ups. Nothing here is public API.

``connections``  how a store runs its statements (one round trip each)
``errors``       driver exceptions as ``jobs.errors`` types; which engines a store runs on
``statements``   the SQL of ``sql/*.sql``, loaded once per table
``listener``     LISTEN on a PostgreSQL channel over a connection of its own
``wakeup``       idle waiters and coalesced NOTIFYs
``workflows``    what the workflow statements need besides the rows (jobs.spi.WorkflowStore)
``sqlite_writes`` how a write on SQLite is scheduled: the writer gate's turns, the lock file
                between processes, the turn taken at BEGIN, group commit, the commit watch
"""
