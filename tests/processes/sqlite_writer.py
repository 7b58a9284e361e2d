"""A SQLite writer in a process of its own, driven line by line over stdin.

``python -m tests.processes.sqlite_writer PATH``: an engine on the file at PATH (SQLite's own
busy timeout 0, so a writer that met SQLite's lock taken would fail at once), a transaction
manager, and then commands:

* ``hold``: open a transaction, insert a row (its BEGIN takes the write turn), print
  ``holding`` and wait for the next line: ``commit``, ``rollback`` (an exception in the block)
  or ``error`` (a failing statement); print ``released`` once the transaction has ended.
* ``write N``: N transactions of one row each, then print ``wrote``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from loguru import logger
from sqlalchemy import event, text

from orm_sqlalchemy import SQLAlchemyTransactionManager, create_engine


class Rollback(Exception):
    pass


async def main(path: str) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{path}")

    @event.listens_for(engine.sync_engine, "checkout")
    def no_busy_wait(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 0")
        cursor.close()

    tm = SQLAlchemyTransactionManager(engine)
    say("ready")
    try:
        while line := await asyncio.to_thread(sys.stdin.readline):
            command, *args = line.split()
            if command == "hold":
                await hold(tm)
            elif command == "write":
                for n in range(int(args[0])):
                    async with tm.transaction() as session:
                        await session.execute(
                            text("INSERT INTO log VALUES (:n, 'child')"), {"n": n}
                        )
                say("wrote")
    finally:
        await engine.dispose()


async def hold(tm: SQLAlchemyTransactionManager) -> None:
    try:
        async with tm.transaction() as session:
            await session.execute(text("INSERT INTO log VALUES (-1, 'child')"))
            say("holding")
            how = (await asyncio.to_thread(sys.stdin.readline)).strip()
            if how == "rollback":
                raise Rollback
            if how == "error":
                await session.execute(text("INSERT INTO no_such_table VALUES (1)"))
    except Exception as exc:
        logger.info("the held transaction ended with {!r}", exc)
    say("released")


def say(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    logger.remove()
    asyncio.run(main(sys.argv[1]))
