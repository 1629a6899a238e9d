"""Shared runtime of the order pipeline: message contract, idempotency keys, domain errors.

Imported by the consumer Lambda (``order_consumer``) and by producers, so that both sides derive
the same key from the same order.
"""
