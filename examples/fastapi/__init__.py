"""A FastAPI shop on neverlost: POST /orders writes the order and its typed receipt job in one
transaction (the outbox); a worker (``neverlost worker examples.fastapi.wiring:ShopConfiguration``)
relays it and sends the receipt. See README.md beside this file."""
