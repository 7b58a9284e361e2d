"""The SQL stores' private database layer: connections, error translation, statements, the
LISTEN connection and wake-ups. Nothing here is public API.

``connections``  how a store runs its statements (one round trip each)
``errors``       driver exceptions as ``jobs.errors`` types; which engines a store runs on
``statements``   the SQL of ``sql/*.sql``, loaded once per table
``listener``     LISTEN on a PostgreSQL channel over a connection of its own
``wakeup``       idle waiters and coalesced NOTIFYs
``sqlite_commits`` commits to a SQLite file by other connections (PRAGMA data_version)
``sqlite_writers`` SQLite's write lock handed to a process's writers in turn (the writer gate)
"""
