"""A Flask app on neverlost: POST /invoices writes the invoice and its outbox entry in one
transaction of the request's own sync session (``append_in``); a worker process
(``neverlost worker examples.flask.worker:build``, no DI container) relays it and sends the
invoice. See README.md beside this file."""
